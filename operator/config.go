package operator

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadConfig returns the API server's configuration: kubeconfig when
// given, else the in-cluster one, else $KUBECONFIG or ~/.kube/config.
func LoadConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	}
	if kubeconfig != "" || err != nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	// One operator follows many BridgeJobs: the informers keep reads off
	// the server, and writes are few per job, but a burst after a restart
	// must not wait on client-go's default 5 requests per second.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}
