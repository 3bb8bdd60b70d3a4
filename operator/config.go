package operator

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadConfig returns the API server's configuration: kubeconfig when
// given, else the in-cluster one, else $KUBECONFIG or ~/.kube/config.
func LoadConfig(kubeconfig, userAgent string, qps float32, burst int) (*rest.Config, error) {
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
	// the server and each job needs a few writes, but client-go's default
	// of 5 requests a second would make 500 new BridgeJobs wait minutes.
	// The server's own flow control (APF) protects it.
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}
