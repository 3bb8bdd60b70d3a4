package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"
)

// TestClientGoDetailIsNotOurDebug: with --log-level debug, client-go's
// verbose lines (klog.V(n): its feature gates' defaults, ten lines at the
// start of every invoke with a KUBECONFIG) stay out of the step's log;
// what client-go says at its own info level or as an error still comes,
// marked as client-go's.
func TestClientGoDetailIsNotOurDebug(t *testing.T) {
	clearEnv(t)
	var out, errb bytes.Buffer
	// Refused (no script): what matters is that logging was set up.
	Main([]string{"invoke", "--log-level", "debug", "--job-name", "klog", "--backend", "local"}, &out, &errb)
	// client-go logs contextually (klog.Background and FromContext): the
	// verbosity is the handler's to decide, not klog's -v flag.
	klog.Background().V(1).Info("Feature gate default state", "feature", "WatchListClient")
	klog.Background().V(3).Info("request tracing")
	klog.InfoS("client-go says this to everyone")
	klog.ErrorS(nil, "client-go failed")
	klog.Flush()
	got := errb.String()
	assert.NotContains(t, got, "Feature gate")
	assert.NotContains(t, got, "request tracing")
	assert.Contains(t, got, "client-go says this to everyone")
	assert.Contains(t, got, "client-go failed")
	assert.Contains(t, got, "source=client-go")
}
