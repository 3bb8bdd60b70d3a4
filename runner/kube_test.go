package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// Tests against the real kube-apiserver started by hack/kube-up.sh.

func TestConfigMapRecordIsIBMCompatible(t *testing.T) {
	s := testkube.RecordStore(t)
	spec := record.Spec{Backend: "slurm", ResourceURL: "https://h:6820", JobScript: "#!/bin/sh\necho hi\n", JobProperties: `{"partition":"debug"}`}
	_, err := runner.EnsureRecord(context.Background(), s, spec, time.Second)
	require.NoError(t, err)
	cm, err := testkube.Client(t).CoreV1().ConfigMaps(s.Namespace).Get(context.Background(), "job-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "https://h:6820", cm.Data["resourceURL"])
	assert.Equal(t, "#!/bin/sh\necho hi\n", cm.Data["jobdata.jobScript"])
	assert.Equal(t, "inline", cm.Data["jobdata.scriptLocation"])
	assert.Equal(t, "20", cm.Data["updateInterval"])
	assert.Equal(t, "bridge-runner", cm.Labels[record.LabelManagedBy])
}

func TestConcurrentInvokersOnConfigMapSubmitOnce(t *testing.T) {
	h := newHarness(t, testkube.RecordStore(t))
	h.fake.SubmitDelay = 300 * time.Millisecond
	spec := h.spec(`{"run":"500ms"}`)
	const n = 4
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			iv := h.invoker(spec)
			assert.NoError(t, iv.Run(context.Background()))
			ids[i] = iv.Result().ID
		}(i)
	}
	wg.Wait()
	assert.Equal(t, 1, h.fake.Count("submit"), "one submission for %d invokers racing on one ConfigMap", n)
	for _, id := range ids {
		assert.Equal(t, "fake-1", id)
	}
	assert.Equal(t, "DONE", h.record()[record.KeyJobStatus])
}

func TestKillWatchOnConfigMap(t *testing.T) {
	h := newHarness(t, testkube.RecordStore(t))
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.Backend.Logger = nil
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyJobStatus] == "RUNNING"
	}, time.Minute, 20*time.Millisecond)
	polls := h.fake.Count("status")
	setKill(t, h.store)
	start := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("kill=true was not noticed")
	}
	t.Logf("kill=true in the ConfigMap to invoke's end: %s (%d status polls before the kill)", time.Since(start), polls)
	assert.Equal(t, "KILLED", iv.Result().Status)
}
