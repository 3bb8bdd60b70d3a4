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
	os.Exit(Main(commandArgs(os.Args), os.Stdout, os.Stderr))
}

// commandArgs is the command line after the program's name, without a
// second copy of that name. A runtime that passes a component's command as
// the arguments of the image's ENTRYPOINT (KFP's local DockerRunner, `docker
// run IMAGE /bridge-runner invoke ...`) starts /bridge-runner /bridge-runner
// invoke ...; Kubernetes, Argo and KFP on a cluster replace the ENTRYPOINT
// and start /bridge-runner invoke .... Both run the same command. Only an
// argument that is this very executable is dropped: any other first
// argument stays for cobra, which names it if it is not a command.
func commandArgs(argv []string) []string {
	if len(argv) < 2 {
		return nil
	}
	if isThisExecutable(argv[0], argv[1]) {
		return argv[2:]
	}
	return argv[1:]
}

func isThisExecutable(self, arg string) bool {
	if arg == "" || arg[0] == '-' {
		return false
	}
	if arg == self {
		return true
	}
	fi, err := os.Stat(arg)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	exe, err := os.Executable()
	if err != nil {
		return false
	}
	me, err := os.Stat(exe)
	return err == nil && os.SameFile(fi, me)
}
