package slurm

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// counted returns a client that counts requests (by path) and the bytes of
// their answers (countingTransport, byteCounter).
func counted(next http.RoundTripper) (*http.Client, *countingTransport, *byteCounter) {
	ct := &countingTransport{n: map[string]int{}, next: next}
	bc := &byteCounter{next: ct}
	return &http.Client{Transport: bc}, ct, bc
}

// discoveryBudget is the most a step's discovery may read: a ping per known
// version, about 70 bytes each when not served and under 1 KB when served.
// The whole /openapi/v3, which discovery read before, is 208 KB on 22.05 and
// 663 KB on 24.11 (the fake's is a few KB).
const discoveryBudget = 4 << 10

// Discovery asks only pings, newest first, and reads about a kilobyte.
func TestDiscoveryCost(t *testing.T) {
	for _, c := range []struct {
		release string
		want    apiVersion
	}{{"22.05.8", 38}, {"24.11.7", 42}, {"26.11.0", 46}} {
		t.Run(c.release, func(t *testing.T) {
			f := newFake(t, c.release)
			client, _, bc := counted(f.Client().Transport)
			be, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: client})
			require.NoError(t, err)
			v, err := be.(*Backend).version(context.Background())
			require.NoError(t, err)
			assert.Equal(t, c.want, v)
			assert.Equal(t, pingsDownTo(c.want), f.reqs(), "pings only, newest first, none after the first served")
			assert.Less(t, bc.n.Load(), int64(discoveryBudget))
		})
	}
}

// A gateway before slurmrestd that answers an unknown path with a JSON 404
// (as API gateways do) is not taken for a served version.
func TestDiscoveryJSON404IsNotServed(t *testing.T) {
	h := newHarness(t, "24.11.7", "/")
	h.f.addFault(&fault{path: "/v0.0.46/ping", status: 404, body: `{"message":"no Route matched with those values"}`})
	v, err := h.b.version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, apiVersion(42), v)
}

func credsFor(f *fakeSlurm) backends.Credentials {
	return testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})
}

// Backends built in one process for one cluster (the invoke, placement,
// the watcher; here a burst of 100 at once) discover its version once.
func TestDiscoveryOncePerProcess(t *testing.T) {
	f := newFake(t, "24.11.7")
	client := f.Client()
	const n = 100
	var wg sync.WaitGroup
	errs := make([]error, n)
	versions := make([]apiVersion, n)
	for i := 0; i < n; i++ {
		be, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: client})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			versions[i], errs[i] = be.(*Backend).version(context.Background())
		}()
	}
	wg.Wait()
	for i := range errs {
		require.NoError(t, errs[i])
		assert.Equal(t, apiVersion(42), versions[i])
	}
	assert.Equal(t, pingsDownTo(42), f.reqs(), "one discovery for the process")

	// Another client is another way to the cluster: it asks for itself.
	other, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: &http.Client{Transport: client.Transport}})
	require.NoError(t, err)
	_, err = other.(*Backend).version(context.Background())
	require.NoError(t, err)
	assert.Len(t, f.reqs(), 2*len(pingsDownTo(42)))
}

// A version known in the process that slurmrestd stops serving (it was
// upgraded) is forgotten by the process: the backend that meets the 404
// gets a transient error and discovers again, and later backends take the
// new version without asking.
func TestDiscoveryForgetsAnUnservedVersion(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, "24.11.7")
	client := f.Client()
	newBackend := func() *Backend {
		be, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: client})
		require.NoError(t, err)
		return be.(*Backend)
	}
	_, err := newBackend().version(ctx)
	require.NoError(t, err)

	f.mu.Lock()
	f.versions = map[apiVersion]bool{43: true, 44: true, 45: true} // upgraded
	f.mu.Unlock()
	b := newBackend()
	_, err = b.Status(ctx, "100")
	require.ErrorIs(t, err, backends.ErrTransient, "v0.0.42 is no longer served")
	_, err = b.Status(ctx, "100")
	require.ErrorIs(t, err, backends.ErrNotFound, "discovered again and asked")
	assert.Equal(t, apiVersion(45), b.ver.v)

	before := len(f.reqs())
	v, err := newBackend().version(ctx)
	require.NoError(t, err)
	assert.Equal(t, apiVersion(45), v)
	assert.Len(t, f.reqs(), before, "known in the process: no request")
}

// Discover (what a cluster's agent calls, to publish the version) asks
// slurmrestd anew each time, whatever this backend or the process knew,
// and returns the memo the steps recall; a pinned URL needs none.
func TestDiscoverAsksAnew(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, "24.11.7")
	be, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: f.Client()})
	require.NoError(t, err)
	d := be.(backends.Discoverer)
	memo, err := d.Discover(ctx)
	require.NoError(t, err)
	assert.Equal(t, "api=v0.0.42", memo)
	assert.Equal(t, pingsDownTo(42), f.reqs())

	f.mu.Lock()
	f.versions = map[apiVersion]bool{43: true, 44: true} // upgraded
	f.mu.Unlock()
	memo, err = d.Discover(ctx)
	require.NoError(t, err)
	assert.Equal(t, "api=v0.0.44", memo, "found again, not the version known")
	assert.Len(t, f.reqs(), len(pingsDownTo(42))+len(pingsDownTo(44)))

	pinned, err := New(backends.Config{URL: f.URL + "/slurm/v0.0.43/", Credentials: credsFor(f), HTTPClient: f.Client()})
	require.NoError(t, err)
	before := len(f.reqs())
	memo, err = pinned.(backends.Discoverer).Discover(ctx)
	require.NoError(t, err)
	assert.Empty(t, memo, "a pinned version is the URL's: nothing to publish")
	assert.Len(t, f.reqs(), before, "and nothing asked")
}

// A waiter for another backend's discovery gives up with its own context.
func TestDiscoveryWaitHonoursContext(t *testing.T) {
	f := newFake(t, "24.11.7")
	f.addFault(&fault{path: "/v0.0.46/ping", delay: 3 * time.Second, status: 404, body: "Unable find requested URL.", contentType: "text/plain", times: 1})
	client := f.Client()
	first, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: client})
	require.NoError(t, err)
	second, err := New(backends.Config{URL: f.URL, Credentials: credsFor(f), HTTPClient: client})
	require.NoError(t, err)
	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = first.(*Backend).version(context.Background())
	}()
	<-started
	for i := 0; i < 100 && len(f.reqs()) == 0; i++ {
		time.Sleep(10 * time.Millisecond) // until the first is asking
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = second.(*Backend).version(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// On the real clusters, discovery by ping picks the newest version both
// sides speak (v0.0.38 on 22.05, v0.0.42 on 24.11, v0.0.45 on 26.05) and reads a small
// fraction of what the OpenAPI document costs, which the test measures too.
func TestRealDiscovery(t *testing.T) {
	want := map[string]apiVersion{"22.05": 38, "24.11": 42, "26.05": 45}
	for _, rs := range realSlurms(t) {
		if strings.Contains(rs.name, "-v0.0.") {
			continue // a pinned API discovers nothing
		}
		t.Run(rs.name, func(t *testing.T) {
			measure := func(find func(*Backend) (apiVersion, string, error)) (apiVersion, *countingTransport, int64, time.Duration) {
				client, ct, bc := counted(http.DefaultTransport)
				be, err := New(backends.Config{URL: rs.url, Credentials: rs.creds, HTTPClient: client})
				require.NoError(t, err)
				start := time.Now()
				v, _, err := find(be.(*Backend))
				require.NoError(t, err)
				return v, ct, bc.n.Load(), time.Since(start)
			}
			v, ping, pingBytes, tPing := measure(func(b *Backend) (apiVersion, string, error) {
				v, err := b.version(context.Background())
				return v, b.ver.release, err
			})
			release := rs.name
			assert.Equal(t, want[release], v)
			for p := range ping.n {
				assert.True(t, strings.HasSuffix(p, "/ping"), "discovery asked %s", p)
			}
			assert.Less(t, pingBytes, int64(discoveryBudget))

			vDoc, doc, docBytes, tDoc := measure(func(b *Backend) (apiVersion, string, error) { return b.discoverOpenAPI(context.Background()) })
			assert.Equal(t, v, vDoc, "the document agrees")
			t.Logf("Slurm %s: discovery by ping %d requests, %d bytes, %s; by /openapi/v3 %d request, %d bytes, %s",
				release, ping.total(), pingBytes, tPing.Round(time.Microsecond), doc.total(), docBytes, tDoc.Round(time.Microsecond))
		})
	}
}

// The class, not the case: the cluster's version is asked only through
// version (which keeps it for the process), by discover (pings), which
// alone falls back to discoverOpenAPI, the only code that requests the
// OpenAPI document. A new caller of either, or a new request of the
// document, is a step that asks the cluster what it was already told.
func TestDiscoveryHasOneWayIn(t *testing.T) {
	allowed := map[string]string{"discover": "version", "discoverOpenAPI": "discover"}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, file := range pkgs["slurm"].Files {
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if caller, ok := allowed[sel.Sel.Name]; ok {
					seen[sel.Sel.Name]++
					assert.Equal(t, caller, fn.Name.Name, "%s calls %s: ask through version, which keeps the answer for the process", fset.Position(call.Pos()), sel.Sel.Name)
				}
				for _, a := range call.Args {
					if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "/openapi") && (sel.Sel.Name == "do" || sel.Sel.Name == "open") {
						seen["document"]++
						assert.Equal(t, "discoverOpenAPI", fn.Name.Name, "%s requests the OpenAPI document", fset.Position(call.Pos()))
					}
				}
				return true
			})
		}
	}
	assert.Equal(t, map[string]int{"discover": 1, "discoverOpenAPI": 2, "document": 1}, seen, "the walk found the calls it guards")
}

// BenchmarkRealDiscoveryBurst: 100 steps starting at once (each its own
// process, so its own client and no shared memo) discover the version of
// each real cluster, by ping and by the OpenAPI document (the old way). It
// reports the median and slowest discovery, the bytes read per discovery
// and how many failed (each request has RequestTimeout: a step that exits
// 75). Run with -benchtime=1x: each iteration is a burst.
func BenchmarkRealDiscoveryBurst(b *testing.B) {
	for _, tg := range realTargets {
		rs := realSlurmEnv(b, tg.env)
		if rs == nil {
			if os.Getenv("CI") != "" {
				b.Errorf("no real Slurm %s: %s starts one", tg.release, tg.up)
			}
			continue
		}
		for _, way := range []struct {
			name string
			find func(*Backend, context.Context) (apiVersion, string, error)
		}{{"ping", (*Backend).discover}, {"openapi", (*Backend).discoverOpenAPI}} {
			b.Run(tg.release+"/"+way.name, func(b *testing.B) {
				var all []time.Duration
				var bytes, failed int64
				for it := 0; it < b.N; it++ {
					durs, n, f := discoveryBurst(b, rs, way.find)
					all, bytes, failed = append(all, durs...), bytes+n, failed+f
				}
				sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
				b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "p50-ms")
				b.ReportMetric(float64(all[len(all)-1].Milliseconds()), "max-ms")
				b.ReportMetric(float64(bytes)/float64(len(all)), "bytes/discovery")
				b.ReportMetric(float64(failed), "failed")
				b.Log(fmt.Sprintf("burst of %d: p50 %s, max %s, %d failed", len(all), all[len(all)/2], all[len(all)-1], failed))
			})
		}
	}
}

// discoveryBurst runs 100 discoveries at once, each with its own transport
// (steps are processes, and share no connection), and returns their
// durations, the bytes they read and how many failed.
func discoveryBurst(b *testing.B, rs *realSlurm, find func(*Backend, context.Context) (apiVersion, string, error)) ([]time.Duration, int64, int64) {
	const n = 100
	durs := make([]time.Duration, n)
	errs := make([]error, n)
	bcs := make([]*byteCounter, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		bcs[i] = &byteCounter{next: &http.Transport{}}
		be, err := New(backends.Config{URL: rs.url, Credentials: rs.creds, HTTPClient: &http.Client{Transport: bcs[i]}})
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, _, errs[i] = find(be.(*Backend), ctx)
			durs[i] = time.Since(start)
		}()
	}
	wg.Wait()
	var bytes, failed int64
	for i := range errs {
		if errs[i] != nil {
			failed++
			b.Log(errs[i])
		}
		bytes += bcs[i].n.Load()
	}
	return durs, bytes, failed
}
