package bench

import (
	"fmt"
	"testing"
)

// BenchmarkSlurmSSH: the same jobs as BenchmarkSlurm, through a login node
// over SSH (sbatch, scontrol) instead of slurmrestd.
func BenchmarkSlurmSSH(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SSH_URL", "BRIDGE_TEST_SSH_CREDS")
	benchSSH(b, "slurm", env)
}

// BenchmarkHTCondor: a real HTCondor pool's submit host over SSH. Its
// negotiation cycle, not bridge-runner, sets most of the time to start.
func BenchmarkHTCondor(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_CONDOR_SSH_URL", "BRIDGE_TEST_CONDOR_SSH_CREDS")
	benchSSH(b, "htcondor", env)
}

func benchSSH(b *testing.B, backend string, env []string) {
	for _, job := range jobs[:2] {
		b.Run(fmt.Sprintf("job=%s/interval=1s", job.name), func(b *testing.B) {
			var runs []run
			for i := 0; i < b.N; i++ {
				runs = append(runs, invoke(b, nil, "--state-dir", b.TempDir(), "--job-name", "bench", "--backend", backend,
					"--resource-url", env[0], "--credentials-dir", env[1], "--script", "#!/bin/sh\n"+job.sh+"\n", "--update-interval", "1"))
			}
			report(b, runs, job.length)
		})
	}
}
