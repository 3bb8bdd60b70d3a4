package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/record"
)

// -out keeps the page and the picture of TestRenderFromThrowawayPrometheus
// (for docs/images): go test ./hack/dashshot -run Throwaway -args -out DIR
var outDir = flag.String("out", "", "directory to keep the rendered page and PNG in")

const shippedDashboard = "../../deploy/grafana/bridge-runner-operator.json"

// needTools makes sure chromium and prometheus are here: under CI=true
// hack/dashshot-deps.sh installs them and their absence fails the test;
// elsewhere the test skips, naming the script.
func needTools(t *testing.T) {
	t.Helper()
	missing := func() []string {
		var m []string
		for _, c := range []string{"chromium", "prometheus"} {
			if _, err := exec.LookPath(c); err != nil {
				m = append(m, c)
			}
		}
		return m
	}
	if len(missing()) == 0 {
		return
	}
	if os.Getenv("CI") != "true" {
		t.Skipf("%v missing: bash hack/dashshot-deps.sh installs them (under CI=true this test installs them, or fails)", missing())
	}
	if out, err := exec.Command("bash", "../dashshot-deps.sh").CombinedOutput(); err != nil || len(missing()) > 0 {
		t.Fatalf("%v still missing after hack/dashshot-deps.sh (%v): %s", missing(), err, out)
	}
}

// startPrometheus runs Debian's Prometheus on a free loopback port with
// its own config and data under a temp dir, scraping target every second
// as the job bridge-runner-operator; it is stopped at the test's end.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n"+
		"  - {job_name: bridge-runner-operator, static_configs: [{targets: [%q]}]}\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprint("data", attempt)), "--web.listen-address="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
		base := "http://" + addr
		if waitFor(60*time.Second, exited, func() bool { return httpOK(base + "/-/ready") }) {
			return base
		}
		t.Logf("Prometheus did not start (attempt %d): %s", attempt, lastLines(log.String(), 5))
	}
	t.Fatal("Prometheus did not start in 3 attempts")
	return ""
}

func httpOK(u string) bool {
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitFor polls cond with jittered back-off until it holds (true), the
// ceiling passes or stop closes (false).
func waitFor(ceiling time.Duration, stop <-chan struct{}, cond func() bool) bool {
	deadline := time.Now().Add(ceiling)
	bo := record.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second}
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-stop:
			return false
		case <-time.After(bo.Next()):
		}
	}
	return true
}

// TestRenderFromThrowawayPrometheus (issue 44): the shipped dashboard
// drawn from a real Prometheus (Debian's) that scraped, for about 16 s,
// an exposition of every metric its queries name: every panel is a
// figure with data, the PNG is chromium's picture of the whole page (its
// size, not blank); with a $job no series has, the panels without an
// `or vector(0)` say "No data" and are counted so.
func TestRenderFromThrowawayPrometheus(t *testing.T) {
	needTools(t)
	_, panels, err := loadDashboard(shippedDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	fams := familiesOf(exprs)
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tick := int(scrapes.Add(1))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, f := range fams {
			f.write(w, tick)
		}
	}))
	defer srv.Close()
	base := startPrometheus(t, strings.TrimPrefix(srv.URL, "http://"))
	start := time.Now().UTC().Truncate(time.Second)
	if !waitFor(90*time.Second, nil, func() bool { return scrapes.Load() >= 16 }) {
		t.Fatalf("Prometheus scraped the exposition %d times in 90 s, want 16", scrapes.Load())
	}
	dir := cmp(*outDir, t.TempDir())
	args := []string{"-prometheus", base, "-dashboard", shippedDashboard, "-from", start.Format(time.RFC3339),
		"-to", time.Now().UTC().Format(time.RFC3339), "-step", "1s"}
	sum := render(t, append(args, "-html", filepath.Join(dir, "dashboard.html"), "-png", filepath.Join(dir, "dashboard.png")), 0)
	if sum.Panels != len(panels) || sum.WithData != len(panels) || len(sum.NoData)+len(sum.Errors) > 0 {
		t.Errorf("%d panels, %d with data, want all %d; no data: %v; errors: %v", sum.Panels, sum.WithData, len(panels), sum.NoData, sum.Errors)
	}
	checkPage(t, sum.HTML, panels, len(panels))
	checkPNG(t, sum.PNG, 1600, sum.Height)

	none := render(t, append(args, "-var", "job=no-such-job", "-html", filepath.Join(t.TempDir(), "none.html")), 0)
	if len(none.NoData) == 0 || none.WithData+len(none.NoData) != len(panels) {
		t.Errorf("with $job matching nothing: %d with data, no data %v; want some of the %d without", none.WithData, none.NoData, len(panels))
	}
	checkPage(t, none.HTML, panels, none.WithData)
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// render runs the command in this process and checks its exit code.
func render(t *testing.T, args []string, want int) summary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if code := run(ctx, args, &stdout, &stderr); code != want {
		t.Fatalf("dashshot exited %d, want %d: %s", code, want, stderr.String())
	}
	var sum summary
	if want == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
			t.Fatalf("summary %q: %v", stdout.String(), err)
		}
	}
	return sum
}

// checkPage: one figure per panel, titled as the panel, withData of them
// drawn with data and the rest saying "No data".
func checkPage(t *testing.T, path string, panels []panel, withData int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if n := strings.Count(page, `<figure class="panel"`); n != len(panels) {
		t.Errorf("%s: %d figures, want one per panel (%d)", path, n, len(panels))
	}
	for _, p := range panels {
		if !strings.Contains(page, `data-title="`+html.EscapeString(p.Title)+`"`) {
			t.Errorf("%s: no figure for the panel %q", path, p.Title)
		}
	}
	if n := strings.Count(page, `data-state="data"`); n != withData {
		t.Errorf("%s: %d figures with data, want %d", path, n, withData)
	}
	if n := strings.Count(page, ">No data</text>"); n != len(panels)-withData {
		t.Errorf("%s: %d figures say No data, want %d", path, n, len(panels)-withData)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("%s: the page should be self-contained, no script, nothing to fetch", path)
	}
}

// checkPNG: the file is a PNG of width × height that is not blank (many
// colours, the pixels' brightness varies).
func checkPNG(t *testing.T, path string, width, height int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("%s: %dx%d, want %dx%d", path, b.Dx(), b.Dy(), width, height)
	}
	colours, mean, variance := pixelStats(img)
	t.Logf("%s: %d colours, brightness mean %.1f, variance %.1f", path, colours, mean, variance)
	if colours < 16 || variance < 20 {
		t.Errorf("%s looks blank: %d colours, brightness variance %.1f", path, colours, variance)
	}
}

func pixelStats(img image.Image) (colours int, mean, variance float64) {
	seen := map[uint32]bool{}
	var sum, sq, n float64
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|bl>>8] = true
			l := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			sum, sq, n = sum+l, sq+l*l, n+1
		}
	}
	mean = sum / n
	return len(seen), mean, sq/n - mean*mean
}
