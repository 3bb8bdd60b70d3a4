// Package builtin lists the backends compiled into bridge-runner. The list is
// explicit (no init() registration) so that what a binary contains is
// visible in one place.
package builtin

import (
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/local"
	"github.com/bridge-runner/bridge-runner/backends/lsf"
	"github.com/bridge-runner/bridge-runner/backends/quantum"
	"github.com/bridge-runner/bridge-runner/backends/ray"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
)

// Registry returns a registry with every built-in backend.
func Registry() *backends.Registry {
	r := backends.NewRegistry()
	must(r.Register(local.Name, local.New))
	must(r.Register(slurm.Name, slurm.New))
	must(r.Register(lsf.Name, lsf.New))
	must(r.Register(quantum.Name, quantum.New))
	must(r.Register(ray.Name, ray.New))
	must(r.Register(htcondor.Name, htcondor.New))
	return r
}

func must(err error) {
	if err != nil {
		panic(err) // a programming error: two backends with one name
	}
}
