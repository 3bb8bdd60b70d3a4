package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// Time figures (start-up, start to first request) are guarded as ratios
// against a reference build timed in the same run, side by side, rather
// than against a recorded number: on this shared 2-core machine the load
// moves a median by far more than any tolerance (a run at load 2 failed
// the old 10 % guard though the binary took 0.2–0.8x the time of the
// baseline commit's binary run beside it). Both builds see the same load
// when their runs alternate, so their ratio is the binary's own.
//
// The reference is bridge-runner built from referenceCommit, the commit
// whose sizes and peak RSS bench/baseline.json records: one build that
// every guarded figure speaks of, and one that does not move with each
// commit (a guard against the previous commit would let a slowdown pass
// in steps of just under the tolerance). It is the same source the
// benchmark builds, from `git archive`, with the same flags, so nothing but
// the code differs. Move referenceCommit forward when baseline.json is
// recorded again (BRIDGE_BENCH_RECORD=1), and say so in BENCHMARKS.md.
// BRIDGE_BENCH_REFERENCE=/path/to/bridge-runner uses that binary instead
// (a checkout without history, or a comparison of one's own).
const referenceCommit = "f5483800a42750bb76dc1b6e257084458e2d89cf"

// ratioTolerance: a ratio above 1 + ratioTolerance is a regression. With
// the current build as its own reference (BRIDGE_BENCH_REFERENCE), at load
// averages of 1 to 10 on this 2-core machine (2026-11-26), the medians of
// the rounds' ratios were 1.00–1.10 for 40 rounds of start-up and
// 1.03–1.13 for 20 rounds of start to first request; with 10 rounds they
// spread over 0.67–1.24, hence the rounds the benchmarks take.
const ratioTolerance = 0.25

var referenceBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("BRIDGE_BENCH_REFERENCE"); bin != "" {
		return bin, nil
	}
	src := filepath.Join(workDir, "reference-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	var gitErr, tarErr bytes.Buffer
	archive := exec.Command("git", "-C", "..", "archive", referenceCommit)
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin, _ = archive.StdoutPipe()
	archive.Stderr, untar.Stderr = &gitErr, &tarErr
	if err := untar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return "", fmt.Errorf("git archive %s: %v: %s (outside a git checkout, or in a shallow clone, fetch the history or set BRIDGE_BENCH_REFERENCE to a reference binary)",
			referenceCommit[:7], err, bytes.TrimSpace(gitErr.Bytes()))
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("unpacking the reference source: %v: %s", err, bytes.TrimSpace(tarErr.Bytes()))
	}
	bin := filepath.Join(workDir, "bridge-runner-reference")
	if err := build(src, bin); err != nil {
		return "", fmt.Errorf("building the reference %s: %v", referenceCommit[:7], err)
	}
	return bin, nil
})

// build builds bridge-runner from the module in dir as `make build` does:
// static, stripped.
func build(dir, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/bridge-runner")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// sideBySide times this build and the reference in turn, rounds times
// each, in the order this, reference, reference, this, ... so that neither
// always goes first. It returns the medians and the median of the rounds'
// ratios (each round's two runs are next to each other in time, so the
// ratio of a round sees one load). Without a reference it fails b's
// guard: a time figure with nothing to compare with is not a pass. Only
// the final pass runs (see finalPass).
func sideBySide(b *testing.B, rounds int, timeIt func(bin string) time.Duration) (this, ref time.Duration, ratio float64, ok bool) {
	if !finalPass(b) { // the rounds are many already; the first pass would only double them
		return 0, 0, 0, false
	}
	refBin, err := referenceBinary()
	if err != nil {
		guardLine(b, fmt.Sprintf("BENCH-GUARD FAIL %s: no reference build to compare the time with: %v", b.Name(), err), true)
		return 0, 0, 0, false
	}
	var thisT, refT []time.Duration
	var ratios []float64
	for i := 0; i < rounds; i++ {
		var t, r time.Duration
		if i%2 == 0 {
			t, r = timeIt(binary), timeIt(refBin)
		} else {
			r, t = timeIt(refBin), timeIt(binary)
		}
		thisT, refT = append(thisT, t), append(refT, r)
		ratios = append(ratios, float64(t)/float64(r))
	}
	return median(thisT), median(refT), median(ratios), true
}

func median[T int64 | float64 | time.Duration](s []T) T {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}
