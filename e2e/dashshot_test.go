package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The dashboard's pictures from the real run (issue 44): hack/dashshot
// draws every panel of deploy/grafana/bridge-runner-operator.json from the
// suite's Prometheus over the whole run and has headless chromium take a
// PNG of the page (hack/e2e.sh installs chromium with
// hack/dashshot-deps.sh). The files go to $BRIDGE_E2E_ARTIFACTS, else to
// bridge-runner-e2e-dashboard under the temp dir, and stay after the run
// (for docs/images).

// suiteStart is when this test binary started: the pictures span the run.
var suiteStart = time.Now().UTC()

// dashshotSummary is hack/dashshot's JSON line.
type dashshotSummary struct {
	Panels        int
	WithData      int      `json:"with_data"`
	NoData        []string `json:"no_data"`
	Errors        []string
	HTML, PNG     string
	Width, Height int
}

// renderDashboard draws the dashboard from prom (the suite's Prometheus)
// and checks the pictures: every query accepted, one figure per panel,
// most panels with data (at least 9 in 10: those the run exercises), the
// PNG decoded at the page's size and not blank. Outside CI a machine
// without chromium only logs that it drew nothing.
func (e *env) renderDashboard(t *testing.T, prom string) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium for the dashboard's pictures (hack/e2e.sh installs it with hack/dashshot-deps.sh; CI=true, so this fails)")
		}
		t.Log("no chromium: the dashboard's pictures are not drawn (bash hack/dashshot-deps.sh installs it)")
		return
	}
	dir := os.Getenv("BRIDGE_E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "bridge-runner-e2e-dashboard")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/dashshot", "-prometheus", prom,
		"-dashboard", filepath.Join(e.repo, "deploy", "grafana", "bridge-runner-operator.json"),
		"-from", suiteStart.Format(time.RFC3339), "-to", time.Now().UTC().Add(time.Second).Format(time.RFC3339),
		"-html", filepath.Join(dir, "dashboard.html"), "-png", filepath.Join(dir, "dashboard.png"))
	cmd.Dir = e.repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/dashshot: %v: %s %s", err, stderr.String(), stdout.String())
	}
	var sum dashshotSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("hack/dashshot's summary %q: %v", stdout.String(), err)
	}
	t.Logf("dashboard drawn from the run: %d panels, %d with data, no data: %v; %s, %s (%dx%d)",
		sum.Panels, sum.WithData, sum.NoData, sum.HTML, sum.PNG, sum.Width, sum.Height)
	if len(sum.Errors) > 0 || sum.Panels == 0 || sum.WithData*10 < sum.Panels*9 {
		t.Errorf("the dashboard from the run: %d of %d panels with data, want at least 9 in 10; no data: %v; errors: %v",
			sum.WithData, sum.Panels, sum.NoData, sum.Errors)
	}
	checkDashboardFiles(t, sum)
}

// checkDashboardFiles: one figure per panel in the page; the PNG decodes
// at the page's size and has many colours (a blank or error page has few).
func checkDashboardFiles(t *testing.T, sum dashshotSummary) {
	t.Helper()
	page, err := os.ReadFile(sum.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `<figure class="panel"`); n != sum.Panels {
		t.Errorf("%s: %d figures for %d panels", sum.HTML, n, sum.Panels)
	}
	f, err := os.Open(sum.PNG)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: not a PNG: %v", sum.PNG, err)
	}
	b := img.Bounds()
	if b.Dx() != sum.Width || b.Dy() != sum.Height {
		t.Errorf("%s: %dx%d, want the page's %dx%d", sum.PNG, b.Dx(), b.Dy(), sum.Width, sum.Height)
	}
	colours := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colours) < 16 {
		t.Errorf("%s looks blank: %d colours", sum.PNG, len(colours))
	}
}
