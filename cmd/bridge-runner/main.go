// Command bridge-runner turns a job on a system that Kubernetes does not
// manage (Slurm, LSF, Ray, IBM Quantum, or this machine) into an ordinary
// workflow step: create-configmap, invoke, cleanup.
package main

import (
	"os"

	"github.com/bridge-runner/bridge-runner/backends/local"
	// Before any other package's init work: see the package.
	_ "github.com/bridge-runner/bridge-runner/internal/oneproc"
)

func main() {
	// A local job's supervisor is this same binary, started with a marker
	// in its environment; it must not parse the command line.
	local.RunSupervisorIfRequested()
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
