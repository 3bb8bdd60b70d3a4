package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// screenshot has Debian's headless chromium take a PNG of the page, width
// × height pixels. The page is a local file with nothing to fetch; the
// flags also keep chromium's own background traffic off (no host name
// resolves), and its profile is a temp dir removed after.
func screenshot(ctx context.Context, chromium, page, png string, width, height int, timeout time.Duration) error {
	bin, err := exec.LookPath(chromium)
	if err != nil {
		return fmt.Errorf("-chromium %s: not found (on Debian: apt-get install -y chromium, or bash hack/dashshot-deps.sh)", chromium)
	}
	absPage, _ := filepath.Abs(page)
	absPNG, _ := filepath.Abs(png)
	profile, err := os.MkdirTemp("", "dashshot-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--user-data-dir="+profile, "--force-device-scale-factor=1",
		fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+absPNG, "file://"+absPage)
	// Chromium's helpers are its children: on the deadline the whole group
	// goes, not only the browser process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(), "HOME="+profile)
	_ = os.Remove(absPNG)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("chromium took more than %s for the screenshot", timeout)
	}
	if _, serr := os.Stat(absPNG); err != nil || serr != nil {
		return fmt.Errorf("chromium made no screenshot (%v): %s", err, lastLines(string(out), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], " | ")
}
