package runner_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// A record of any origin is watched: IBM's operator and kubectl create
// records without bridge-runner's managed-by label, and the watcher,
// which listed by that label, silently did nothing for them (the invokes
// took the lease but no batched query was ever sent).
func TestWatcherWatchesRecordsOfAnyOrigin(t *testing.T) {
	const n = 4
	h := newHarness(t, nil)
	base := testkube.RecordStore(t)
	cs := testkube.Client(t)
	creds := fakeCredentials(t)
	props := `{"pending":"1s","run":"3s"}`
	var wg sync.WaitGroup
	res := make([]runner.Result, n)
	for i := range n {
		job := fmt.Sprintf("job-%d", i)
		spec := h.spec(props)
		spec.UpdateInterval = "5"
		// Created as kubectl would: the description's keys, no labels.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.ConfigMapName(job)}, Data: spec.WithDefaults().Data()}
		_, err := cs.CoreV1().ConfigMaps(base.Namespace).Create(context.Background(), cm, metav1.CreateOptions{})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			iv := h.invoker(spec)
			iv.JobName, iv.Holder = job, fmt.Sprintf("invoker-%d", i)
			iv.Store = &record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: record.ConfigMapName(job)}
			iv.Backend.Credentials = creds
			iv.MinPoll = runner.DefaultMinPoll
			ctx, cancel := context.WithTimeout(context.Background(), groupRunCeiling)
			defer cancel()
			assert.NoError(t, iv.Run(ctx), job)
			res[i] = *iv.Result()
		}()
	}
	wg.Wait()
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status)
	}
	got, err := cs.CoreV1().ConfigMaps(base.Namespace).Get(context.Background(), record.ConfigMapName("job-0"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, got.Labels, record.LabelManagedBy, "the records stayed as kubectl made them")
	t.Logf("status requests per job: %.1f (+%d batched queries)", statusPerJob(h, n), h.fake.Count("statusmany"))
	assert.Positive(t, h.fake.Count("statusmany"), "the watcher asked for the unlabelled records' jobs")
	assert.LessOrEqual(t, statusPerJob(h, n), 6.0, "a first poll, a few until the watcher covers the job, one per change")
}

// The class: no watcher (runner and its package watcher, the agent) lists
// records by bridge-runner's managed-by label (record.NewConfigMapLister),
// which leaves out the records of other origins.
func TestWatchersListRecordsOfAnyOrigin(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.go", "watcher/*.go", "../agent/*.go"} {
		more, err := filepath.Glob(glob)
		require.NoError(t, err)
		files = append(files, more...)
	}
	listers := 0 // the walk reads the listers there are (the watcher's, the agent's)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewSelectedLister" {
				listers++
			}
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewConfigMapLister" {
				t.Errorf("%s lists records by the managed-by label (record.NewConfigMapLister): a record of another origin (IBM's operator, kubectl) is not watched; use record.NewSelectedLister", f)
			}
			return true
		})
	}
	assert.GreaterOrEqual(t, listers, 3, "the walk finds the watcher's and the agent's listers (watchgroup.go, watchleader.go, agent.go)")
}
