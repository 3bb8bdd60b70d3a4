package bench

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// peakRSS follows a running process's peak resident set (VmHWM in
// /proc/PID/status, a high-water mark kept by the kernel) until the
// returned stop is called after the process has ended; stop returns the
// peak in bytes. The rusage of a waited child is no use for this: at exec
// the kernel keeps the old memory's high-water mark, and Go starts children
// sharing the parent's memory until exec, so every figure would be at least
// the size of the benchmark process itself (about 23 MiB).
func peakRSS(pid int, every time.Duration) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v := vmHWM(path); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// vmHWM reads "VmHWM:   1234 kB" from a status file (0 once the process is gone).
func vmHWM(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(data, []byte("VmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.Fields(line)[0]), 10, 64)
	if err != nil {
		return 0
	}
	return kb * 1024
}

// The figure is the child's own: a small process measured from this
// (larger) test process must not come out at this process's size.
func TestPeakRSSIsTheChildsOwn(t *testing.T) {
	cmd := exec.Command("sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := peakRSS(cmd.Process.Pid, 5*time.Millisecond)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	child, self := stop(), vmHWM("/proc/self/status")
	if child <= 0 || child >= self/2 {
		t.Errorf("peak RSS of sleep: %d bytes; of this test process: %d bytes", child, self)
	}
}
