// Package oneproc runs the process on one P (GOMAXPROCS=1) unless the
// GOMAXPROCS environment variable says otherwise. The release binary
// imports it first thing, for its side effect.
//
// Every command of bridge-runner waits on the network and on other
// processes; none needs two cores. Each P costs memory that stays resident:
// its own cache of heap spans per size class, a GC mark worker with its
// stack, more threads. Following a Slurm job with the ConfigMap record on
// two cores that was 0.7–1 MiB of a 21 MiB peak (BENCHMARKS.md); on a node
// with many cores, where Go sizes GOMAXPROCS by the CPUs or the pod's limit,
// it would be more.
//
// It is a package of its own, not code in main, because package
// initialisers run before main and it must act before them: packages are
// initialised in the order of their import paths once their own imports
// are, and this one needs only os and runtime, so it runs before
// client-go's, minio-go's and the backends'. Set later, the second P's
// cache has already been filled by that init work.
package oneproc

import (
	"os"
	"runtime"
)

func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
