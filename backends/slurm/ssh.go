package slurm

// Slurm over SSH: when resourceURL is ssh://USER@LOGIN-NODE[:PORT][/DIR],
// the job is submitted with sbatch on the login node (the script on stdin,
// --parsable), followed with scontrol show job (and sacct once slurmctld has
// forgotten it, where accounting is on), cancelled with scancel, and found
// by key with squeue; many jobs' states come from one squeue (and one sacct
// for the jobs it no longer lists, see StatusMany). States map through the
// same table as the REST API's (mapState). Each job gets a directory DIR/<key> (DIR defaults to
// bridge-runner in the home directory) that is its working directory unless
// jobproperties sets chdir, holding its input files and, unless
// jobproperties sets output, its output job.out, read live over SFTP.
// Credentials are those of package sshexec.

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// SSHBackend is the slurm backend reached over SSH.
type SSHBackend struct {
	ssh *sshexec.Client
	log *slog.Logger

	mu          sync.Mutex
	files       map[string]jobFiles       // job id → where its files are
	taskOut     map[string]map[int]string // array id → task → its output (ssh_tasklogs.go)
	taskOutDone map[string]bool           // array id → taskOut lists every task that will have an output
	maxArray    int                       // the cluster's MaxArraySize, once read (ssh_array.go)
	noSacct     bool                      // sacct said accounting is off
}

// jobFiles is what the backend knows of where a job's files are; a field
// not known is "".
type jobFiles struct {
	workDir, stdout string
	end             string // the end marker's path (ssh_end.go); not for an array
	taskOut         string // an array's tasks' output, %a for the task; "" if not known
}

func newSSH(cfg backends.Config) (backends.Backend, error) {
	c, log, err := sshexec.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &SSHBackend{ssh: c, log: log, files: map[string]jobFiles{}}, nil
}

// Close closes the SSH connection.
func (b *SSHBackend) Close() error { return b.ssh.Close() }

// Validate checks the job and the credentials without connecting.
func (b *SSHBackend) Validate(job backends.Job) error {
	if _, err := buildSbatch(job); err != nil {
		return err
	}
	return b.ssh.Check()
}

// StagesInputs: additionalData is uploaded into the job's directory.
func (b *SSHBackend) StagesInputs() bool { return true }

var parsableID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+)(;.*)?$`) })

// Submit uploads the inputs and runs sbatch with the script on stdin.
func (b *SSHBackend) Submit(ctx context.Context, job backends.Job) (string, error) {
	sj, err := buildSbatch(job)
	if err != nil {
		return "", err
	}
	id, dir, err := b.sbatch(ctx, job, sj, "job.out")
	if err == nil {
		b.remember(id, jobFiles{end: path.Join(dir, endFile)})
	}
	return id, err
}

// sbatch stages the job's inputs into its directory and submits sj there,
// its output into out (unless jobproperties chose one). It returns the
// job's id and directory.
func (b *SSHBackend) sbatch(ctx context.Context, job backends.Job, sj *sshJob, out string) (string, string, error) {
	dir, err := b.ssh.JobDir(ctx, job.Key)
	if err != nil {
		return "", "", err
	}
	if err := b.stageInputs(ctx, dir, job.Inputs); err != nil {
		return "", "", err
	}
	if sj.array == "" { // an array's wrapper (SubmitArray) leaves no marker
		sj.script = wrapScript(sj.script, wrapping{end: path.Join(dir, endFile)})
	}
	// The job's variables (its parameters among them) go in a file only its
	// user can read, not on sbatch's command line, which every user of the
	// login node can read. umask 077: sbatch hands its umask to the job
	// (SLURM_UMASK), so job.out and what the job writes are its owner's only.
	vars, err := envScript(sj.env)
	if err != nil {
		return "", "", err
	}
	envFile := path.Join(dir, "job.env")
	if err := b.ssh.WriteFile(ctx, envFile, strings.NewReader(vars), 0o600); err != nil {
		return "", "", err
	}
	args := []string{"sh", "-c", `umask 077 && . "$1" && shift && exec "$@"`, "sh", envFile, "sbatch", "--parsable"}
	if !sj.chdir {
		args = append(args, "--chdir="+dir)
	}
	if !sj.output {
		args = append(args, "--output="+path.Join(dir, out))
	}
	args = append(args, sj.args...)
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: args, Stdin: strings.NewReader(sj.script)})
	if err != nil {
		return "", "", err
	}
	if res.ExitCode != 0 {
		if sj.array != "" && res.Says("Invalid job array specification") {
			return "", "", backends.Invalid("array", "sbatch refused the array %s (exit %d): %s; see the cluster's MaxArraySize (scontrol show config)", sj.array, res.ExitCode, slurmCLI.Said("sbatch", res))
		}
		return "", "", b.ssh.CommandError(slurmCLI, "sbatch", res, "jobproperties")
	}
	m := parsableID().FindStringSubmatch(strings.TrimSpace(string(res.Stdout)))
	if m == nil {
		return "", "", fmt.Errorf("sbatch --parsable printed no job id (%d bytes, not shown)", len(res.Stdout))
	}
	return m[1], dir, nil
}

// stageInputs uploads the job's input files into its directory dir.
func (b *SSHBackend) stageInputs(ctx context.Context, dir string, inputs []backends.InputFile) error {
	if err := b.ssh.MkdirAll(ctx, dir, 0o700); err != nil {
		return err
	}
	for _, in := range inputs {
		if in.Name == "" || strings.ContainsAny(in.Name, "/\x00") || in.Name == "." || in.Name == ".." {
			return backends.Invalid("jobdata.additionalData", "input file name %q cannot be staged", in.Name)
		}
		rc, err := in.Open(ctx)
		if err != nil {
			return fmt.Errorf("input %s: %w", in.Name, err)
		}
		err = b.ssh.WriteFile(ctx, path.Join(dir, in.Name), rc, 0o600)
		rc.Close()
		if err != nil {
			return fmt.Errorf("input %s: %w", in.Name, err)
		}
	}
	return nil
}

// envScript is a POSIX sh script that exports env (NAME=VALUE each), every
// value quoted as one word. A NUL byte cannot be in a variable at all.
func envScript(env []string) (string, error) {
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.IndexByte(v, 0) >= 0 {
			return "", backends.Invalid("jobdata", "%s holds a NUL byte, which no job variable can hold", k)
		}
		b.WriteString("export " + k + "=" + sshexec.Quote(v) + "\n")
	}
	return b.String(), nil
}

// slurmCLI is Slurm as its commands on a login node show it.
// slurmCLI: Slurm's commands write an error as "sbatch: error: <reason>"
// (or "fatal:"), and scontrol/squeue as "slurm_load_jobs error: <reason>".
var slurmCLI = sshexec.System{Host: "a Slurm login node", Controller: "slurmctld",
	Unreachable: []string{"Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted",
		"Connection refused", "Communication connection failure", "slurm_persist_conn_open"},
	Errors: []*regexp.Regexp{regexp.MustCompile(`^s[a-z]+: (?:error|fatal): (.+)$`), regexp.MustCompile(`^slurm_[a-z_]+ error: (.+)$`)}}

var slurmID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+$`) })

// Status reads the job with scontrol, or with sacct once slurmctld forgot it.
func (b *SSHBackend) Status(ctx context.Context, id string) (backends.Status, error) {
	if !slurmID().MatchString(id) {
		return backends.Status{}, fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", "show", "job", "--oneliner", id}})
	if err != nil {
		return backends.Status{}, err
	}
	text := slurmCLI.Said("scontrol", res)
	switch {
	case res.ExitCode == 0:
		f := parseScontrol(string(res.Stdout))
		b.remember(id, jobFiles{workDir: f["WorkDir"], stdout: f["StdOut"], end: b.endOf(ctx, f)})
		return scontrolStatus(id, f), nil
	case res.Says("Invalid job id"):
		return b.sacctStatus(ctx, id)
	case res.Says(slurmCLI.Unreachable...):
		return backends.Status{}, backends.Transient(fmt.Errorf("scontrol show job %s: %s", id, text))
	}
	return backends.Status{}, backends.Transient(fmt.Errorf("scontrol show job %s (exit %d): %s", id, res.ExitCode, text))
}

// parseScontrol reads scontrol's KEY=VALUE words. Values with spaces
// (Command=, WorkDir=) run to the next KEY=.
func parseScontrol(out string) map[string]string {
	f := map[string]string{}
	key := ""
	for _, w := range strings.Fields(out) {
		k, v, ok := strings.Cut(w, "=")
		if ok && k != "" && strings.ToUpper(k[:1]) == k[:1] {
			key = k
			f[key] = v
			continue
		}
		if key != "" {
			f[key] += " " + w
		}
	}
	return f
}

// scontrolStatus maps a job record with the REST API's state table.
func scontrolStatus(id string, f map[string]string) backends.Status {
	return slurmStatus(id, strings.Split(f["JobState"], ","), f["Reason"], f["ExitCode"], f["SubmitTime"], f["StartTime"], f["EndTime"])
}

func slurmStatus(id string, st []string, reason, exit, submit, start, end string) backends.Status {
	out := backends.Status{Raw: strings.Join(st, ","), SubmitTime: slurmTime(submit)}
	out.State, out.Reason = mapState(st, reason)
	if out.State != backends.Pending {
		out.StartTime = slurmTime(start)
	}
	msg := fmt.Sprintf("Slurm job %s is %s", id, out.Raw)
	if reason != "" && reason != "None" {
		msg += " (" + reason + ")"
	}
	if out.State.Final() {
		out.Category = category(st)
		out.EndTime = slurmTime(end)
		if ec, ok := colonExit(exit); ok {
			code := ec.code
			out.ExitCode = &code
			msg += ", " + ec.String()
		}
	}
	out.Message = msg
	return out
}

// colonExit reads "code:signal" as scontrol and sacct print it.
func colonExit(s string) (exitStatus, bool) {
	c, sig, ok := strings.Cut(strings.TrimSpace(s), ":")
	code, err1 := strconv.Atoi(c)
	n, err2 := strconv.Atoi(sig)
	if !ok || err1 != nil || err2 != nil {
		return exitStatus{}, false
	}
	if n != 0 {
		return exitStatus{code: 128 + n, signal: n}, true
	}
	return exitStatus{code: code}, true
}

// slurmTime reads Slurm's local times ("2026-11-23T18:01:06"); "Unknown"
// and "None" are the zero time.
func slurmTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func (b *SSHBackend) remember(id string, f jobFiles) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f == (jobFiles{}) {
		return
	}
	old := b.files[id]
	b.files[id] = jobFiles{workDir: cmp.Or(f.workDir, old.workDir), stdout: cmp.Or(f.stdout, old.stdout), end: cmp.Or(f.end, old.end), taskOut: cmp.Or(f.taskOut, old.taskOut)}
}
