package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/operator"
	"github.com/bridge-runner/bridge-runner/record"
)

var bridgeJobs = schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: "bridgejobs"}

// BenchmarkOperator: one operator process follows N BridgeJobs on the real
// apiserver. No kubelet runs here, so the benchmark plays the N pods by
// writing what invoke writes into each record once its Job appears (an id
// and RUNNING, then DONE); what invoke itself costs is BenchmarkScale's.
// Figures: time from the first create to every BridgeJob mirrored DONE,
// the operator's requests to the apiserver per BridgeJob, its peak RSS and
// its CPU time.
func BenchmarkOperator(b *testing.B) {
	sizes := []int{100, 500}
	if s := os.Getenv("BRIDGE_BENCH_OPERATOR"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("bridgejobs=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				operatorOnce(b, n)
			}
		})
	}
}

func operatorOnce(b *testing.B, n int) {
	cfg := testkube.Config(b)
	cfg.QPS, cfg.Burst = 1000, 2000
	testkube.ApplyCRD(b, cfg, "../deploy/operator/crd.yaml")
	testkube.ApplyCRD(b, cfg, "../deploy/operator/crd-bridgecluster.yaml")
	cs := testkube.ClientFor(b, cfg)
	ns := testkube.Namespace(b, cs)
	dc := dynamic.NewForConfigOrDie(cfg)
	res := dc.Resource(bridgeJobs).Namespace(ns)
	b.Cleanup(func() { dropFinalizers(res) })
	ctx := context.Background()
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds",
		Labels: map[string]string{operator.SecretOptInLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	op := exec.Command(binary, "operator", "--kubeconfig", os.Getenv(testkube.EnvKubeconfig), "--namespace", ns,
		"--leader-elect=false", "--job-image", "example.org/bridge-runner:bench", "--allow-local",
		"--metrics-bind-address=0") // :8080 may be taken on a shared machine
	op.Stderr = &stderr
	if err := op.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = op.Process.Kill(); _ = op.Wait() })
	pods := playPods(b, cs, ns)
	defer pods()

	start := time.Now()
	for i := 0; i < n; i++ {
		bj := &operator.BridgeJob{Spec: operator.BridgeJobSpec{Backend: "local", ResourceSecret: "creds",
			JobData: operator.JobData{JobScript: "true", ScriptLocation: "inline"}}}
		bj.APIVersion, bj.Kind = operator.GroupVersion.String(), "BridgeJob"
		bj.Name = fmt.Sprintf("bench-%d", i)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	created := time.Since(start)
	for done := 0; done < n; {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("%d of %d BridgeJobs DONE after 10 minutes; operator:\n%s", done, n, tail(stderr.String()))
		}
		time.Sleep(time.Second) // a list of every BridgeJob is not free either
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		done = 0
		for _, it := range list.Items {
			if st, _, _ := unstructured.NestedString(it.Object, "status", "state"); st == "DONE" {
				done++
			}
		}
	}
	wall := time.Since(start)
	rssKiB, cpu := procFigures(b, op.Process.Pid)
	_ = op.Process.Signal(syscall.SIGTERM)
	_ = op.Wait()
	reqs, retries := operatorRequests(b, stderr.String())
	b.ReportMetric(wall.Seconds(), "s-to-all-DONE")
	b.ReportMetric(created.Seconds(), "s-to-create")
	b.ReportMetric(float64(reqs)/float64(n), "kube-req/job")
	b.ReportMetric(float64(retries)/float64(n), "retries/job")
	b.ReportMetric(float64(rssKiB)/1024, "peak-RSS-MiB")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.ReportMetric(0, "ns/op")
}

// playPods writes, for each Job the operator creates, what its invoke would
// write into the record: an id and RUNNING, then DONE.
func playPods(b *testing.B, cs kubernetes.Interface, ns string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	names := make(chan string, 1024)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				for _, st := range []string{"RUNNING", "DONE"} {
					if err := writeState(ctx, cs, ns, name, st); err != nil && ctx.Err() == nil {
						b.Errorf("%s: %v", name, err)
					}
				}
			}
		}()
	}
	go func() {
		defer close(names)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				names <- strings.TrimSuffix(m.GetName(), "-bridge-job")
			}
		}
	}()
	return func() { cancel(); w.Stop(); wg.Wait() }
}

func writeState(ctx context.Context, cs kubernetes.Interface, ns, job, state string) error {
	for {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, record.ConfigMapName(job), metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339)
		cm.Data[record.KeyID], cm.Data[record.KeyJobStatus] = "local-"+job, state
		cm.Data[record.KeySubmit] = now
		if state == "DONE" {
			cm.Data[record.KeyEnd] = now
		}
		_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// procFigures reads a process's peak RSS (VmHWM) and its CPU time.
func procFigures(b *testing.B, pid int) (int64, time.Duration) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	var rss int64
	sc := bufio.NewScanner(bytes.NewReader(st))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmHWM:" {
			rss, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 12th and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(ut+sy) * 10 * time.Millisecond
}

var operatorRequestsRE = regexp.MustCompile(`msg="operator stopped" kube_requests=(\d+) retries=(\d+)`)

func operatorRequests(b *testing.B, log string) (requests, retries int64) {
	m := operatorRequestsRE.FindStringSubmatch(log)
	if m == nil {
		b.Fatalf("the operator did not report its requests:\n%s", tail(log))
	}
	requests, _ = strconv.ParseInt(m[1], 10, 64)
	retries, _ = strconv.ParseInt(m[2], 10, 64)
	return requests, retries
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// dropFinalizers lets the namespace's removal take BridgeJobs whose
// operator has stopped.
func dropFinalizers(res dynamic.ResourceInterface) {
	ctx := context.Background()
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, it := range list.Items {
		_, _ = res.Patch(ctx, it.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}
