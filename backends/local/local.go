// Package local runs a job as a process on this machine. It is the embedded
// default backend (no cluster, no HPC system needed) and the model of a
// well-behaved remote system: each job is a directory of records, launched
// through a detached supervisor process that outlives invoke, so a killed
// invoke re-attaches to the same job and never starts it twice.
//
// A job directory <root>/<key>/ holds:
//
//	job.json    what to run (written before the directory is published)
//	script      the inline script, when there is one
//	output.log  the job's stdout and stderr
//	lock        flock held by the supervisor while it lives
//	state.json  written by the supervisor: started, pid, ended, exit status
//	cancel      present once a cancel was requested
package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Name is the backend's registry name.
const Name = "local"

// Backend runs jobs as local processes, keeping records under root.
type Backend struct {
	root string
	// exe is the binary that runs the supervisor (this program).
	exe string
}

// New builds the backend from cfg: records live in cfg.DataDir/local-jobs.
func New(cfg backends.Config) (backends.Backend, error) {
	if cfg.URL != "" {
		return nil, backends.Invalid("resourceURL", "the local backend takes no URL (it runs jobs on this machine); leave it empty")
	}
	if cfg.DataDir == "" {
		return nil, backends.Invalid("state-dir", "the local backend needs a data directory; pass --state-dir")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("local backend: cannot find this program's path to start jobs: %w", err)
	}
	// Absolute: the supervisor runs in the job's directory, where a relative
	// root would name nothing and the job would stay PENDING.
	root, err := filepath.Abs(filepath.Join(cfg.DataDir, "local-jobs"))
	if err != nil {
		return nil, backends.Invalid("state-dir", "%v", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, backends.Invalid("state-dir", "cannot create %s: %v", root, err)
	}
	return &Backend{root: root, exe: exe}, nil
}

// Properties are the local backend's jobproperties.
type Properties struct {
	// Workdir is the job's working directory (default: its job directory).
	Workdir string `json:"workdir"`
	// Env adds environment variables to the job's.
	Env map[string]string `json:"env"`
	// Args are passed to the script.
	Args []string `json:"args"`
}

func parseProperties(raw json.RawMessage) (Properties, error) {
	var p Properties
	if len(raw) == 0 {
		return p, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, backends.Invalid("jobproperties", "%v; the local backend takes workdir (string), env (object of strings) and args (array of strings)", err)
	}
	return p, nil
}

// Validate checks the job before anything is submitted.
func (b *Backend) Validate(job backends.Job) error {
	p, err := parseProperties(job.Properties)
	if err != nil {
		return err
	}
	if p.Workdir != "" {
		if fi, err := os.Stat(p.Workdir); err != nil || !fi.IsDir() {
			return backends.Invalid("jobproperties", "workdir %q is not a directory on this machine", p.Workdir)
		}
	}
	if job.ScriptPath != "" {
		if fi, err := os.Stat(job.ScriptPath); err != nil || fi.IsDir() {
			return backends.Invalid("jobdata.jobScript", "%q is not a file on this machine (scriptLocation is remote, which for the local backend means a local path)", job.ScriptPath)
		}
	}
	if !validKey(job.Key) {
		return backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	return nil
}

func validKey(k string) bool {
	return k != "" && !strings.ContainsAny(k, "/\\") && k != "." && k != ".."
}

// spec is job.json: everything the supervisor needs.
type spec struct {
	Key     string    `json:"key"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Command []string  `json:"command"`
	Workdir string    `json:"workdir"`
	Env     []string  `json:"env"`
}

// state is state.json, written only by the supervisor.
type state struct {
	SupervisorPID int        `json:"supervisorPid"`
	PID           int        `json:"pid,omitempty"`
	Started       time.Time  `json:"started"`
	Ended         *time.Time `json:"ended,omitempty"`
	ExitCode      *int       `json:"exitCode,omitempty"`
	Signal        string     `json:"signal,omitempty"`
	Cancelled     bool       `json:"cancelled,omitempty"`
	Error         string     `json:"error,omitempty"`
}

func (b *Backend) dir(id string) string { return filepath.Join(b.root, id) }

// Submit publishes the job directory atomically (rename of a complete
// staging directory) and launches its supervisor. The id is the key: a
// second submit with the same key finds the directory and fails ErrExists.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	if err := b.Validate(job); err != nil {
		return "", err
	}
	p, _ := parseProperties(job.Properties)
	dst := b.dir(job.Key)
	if _, err := os.Stat(dst); err == nil {
		return "", fmt.Errorf("local job %s: %w", job.Key, backends.ErrExists)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	stage := filepath.Join(b.root, ".stage-"+job.Key+"-"+hex.EncodeToString(suffix))
	if err := os.Mkdir(stage, 0o700); err != nil {
		return "", err
	}
	defer os.RemoveAll(stage) // gone after a successful rename
	sp := spec{Key: job.Key, Name: job.Name, Created: time.Now().UTC(), Workdir: p.Workdir}
	if job.ScriptPath != "" {
		sp.Command = scriptCommand(job.ScriptPath, readHead(job.ScriptPath))
	} else {
		if err := os.WriteFile(filepath.Join(stage, "script"), []byte(job.Script), 0o700); err != nil {
			return "", err
		}
		// By its full path: the job may run in a workdir of its own.
		sp.Command = scriptCommand(filepath.Join(dst, "script"), []byte(job.Script))
	}
	sp.Command = append(sp.Command, p.Args...)
	sp.Env = []string{"BRIDGE_JOB_NAME=" + job.Name, "BRIDGE_JOB_KEY=" + job.Key}
	if len(job.Parameters) > 0 {
		sp.Env = append(sp.Env, "BRIDGE_JOB_PARAMETERS="+string(job.Parameters))
	}
	if len(job.Metadata) > 0 {
		sp.Env = append(sp.Env, "BRIDGE_SCRIPT_METADATA="+string(job.Metadata))
	}
	for k, v := range p.Env {
		sp.Env = append(sp.Env, k+"="+v)
	}
	if len(job.Inputs) > 0 {
		if err := copyInputs(ctx, filepath.Join(stage, "inputs"), job.Inputs); err != nil {
			return "", err
		}
		sp.Env = append(sp.Env, "BRIDGE_INPUT_DIR="+filepath.Join(dst, "inputs"))
	}
	buf, _ := json.MarshalIndent(sp, "", "  ")
	if err := os.WriteFile(filepath.Join(stage, "job.json"), buf, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(stage, dst); err != nil {
		if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return "", fmt.Errorf("local job %s: %w", job.Key, backends.ErrExists)
		}
		return "", err
	}
	// From here on the job exists; if we die before the launch, Status
	// launches it (launching is idempotent).
	if err := b.launch(dst); err != nil {
		return "", backends.Transient(fmt.Errorf("starting the supervisor of %s: %w", job.Key, err))
	}
	return job.Key, nil
}

// StagesInputs: input files are copied into the job's inputs/ directory
// (BRIDGE_INPUT_DIR) before the job is published.
func (b *Backend) StagesInputs() bool { return true }

func copyInputs(ctx context.Context, dir string, inputs []backends.InputFile) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, in := range inputs {
		name := filepath.Base(in.Name)
		if name == "." || name == "/" || name == ".." {
			return backends.Invalid("jobdata.additionalData", "%q has no usable file name", in.Name)
		}
		r, err := in.Open(ctx)
		if err != nil {
			return err
		}
		err = writeFile(filepath.Join(dir, name), r)
		r.Close()
		if err != nil {
			return fmt.Errorf("staging input %s: %w", in.Name, err)
		}
	}
	return nil
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FetchOutput copies a file the job wrote: a relative path is taken from the
// job's working directory.
func (b *Backend) FetchOutput(_ context.Context, id, path string, w io.Writer) error {
	if !validKey(id) {
		return fmt.Errorf("local job %q: %w", id, backends.ErrNotFound)
	}
	var sp spec
	buf, _, err := backends.ReadLocalFile(filepath.Join(b.dir(id), "job.json"), maxJobFile)
	if err != nil {
		return fmt.Errorf("local job %s: %w", id, backends.ErrNotFound)
	}
	if err := json.Unmarshal(buf, &sp); err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		wd := b.dir(id)
		if sp.Workdir != "" {
			wd = sp.Workdir
		}
		path = filepath.Join(wd, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, unwrapNotExist(err))
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func unwrapNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the job did not write it: %w", backends.ErrNotFound)
	}
	return err
}

// scriptCommand runs a script directly when it has a #! line, else with sh.
func scriptCommand(path string, head []byte) []string {
	if !filepath.IsAbs(path) && !strings.HasPrefix(path, ".") {
		path = "./" + path
	}
	if bytes.HasPrefix(head, []byte("#!")) {
		return []string{path}
	}
	return []string{"/bin/sh", path}
}

func readHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(f, head)
	return head[:n]
}

// launch starts a detached supervisor for the job directory. The supervisor
// runs in its own session so it outlives invoke.
func (b *Backend) launch(dir string) error {
	cmd := exec.Command(b.exe)
	cmd.Env = append(os.Environ(), superviseEnv+"="+dir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it if it ends while we live
	return nil
}

// FindByKey returns the job with key, found by its directory.
func (b *Backend) FindByKey(_ context.Context, key string) (string, error) {
	if !validKey(key) {
		return "", nil
	}
	if _, err := os.Stat(filepath.Join(b.dir(key), "job.json")); err == nil {
		return key, nil
	}
	return "", nil
}

// readState reads state.json, or the end the supervisor kept in its
// reservation when the disk was full (see reserve.go).
func (b *Backend) readState(dir string) (*state, error) {
	buf, _, err := backends.ReadLocalFile(filepath.Join(dir, "state.json"), maxJobFile)
	var st state
	if err == nil {
		err = json.Unmarshal(buf, &st)
	}
	if err == nil && st.Ended != nil {
		return &st, nil
	}
	if end := readReserved(dir); end != nil {
		return end, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Status reports the job's state from its records.
func (b *Backend) Status(_ context.Context, id string) (backends.Status, error) {
	if !validKey(id) {
		return backends.Status{}, fmt.Errorf("local job %q: %w", id, backends.ErrNotFound)
	}
	dir := b.dir(id)
	var sp spec
	buf, _, err := backends.ReadLocalFile(filepath.Join(dir, "job.json"), maxJobFile)
	if err != nil {
		return backends.Status{}, fmt.Errorf("local job %s: %w", id, backends.ErrNotFound)
	}
	if err := json.Unmarshal(buf, &sp); err != nil {
		return backends.Status{}, fmt.Errorf("local job %s: job.json is corrupt: %w", id, err)
	}
	out := backends.Status{SubmitTime: sp.Created}
	// Probe the supervisor before reading its state: it records the end
	// before it lets go of the lock, so a supervisor found gone here has
	// either recorded its end in the state read below or died. (Read
	// first, and a fast job's supervisor could record its end and exit in
	// between, and look dead.)
	alive := supervisorAlive(dir)
	st, err := b.readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Not launched yet, or the launcher died: launching again is safe.
		if fi, serr := os.Stat(filepath.Join(dir, "job.json")); serr == nil && time.Since(fi.ModTime()) > time.Second && !alive {
			if lerr := b.launch(dir); lerr != nil {
				return out, backends.Transient(lerr)
			}
		}
		out.State, out.Raw, out.Message = backends.Pending, "PENDING", "waiting for the supervisor to start the job"
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("local job %s: state.json: %w", id, err)
	}
	if st.Ended == nil && !alive {
		st, alive = b.recheck(dir, st)
	}
	out.StartTime = st.Started
	if st.Ended == nil {
		if !alive {
			out.State, out.Raw = backends.Unknown, "LOST"
			out.Message = "the job's supervisor died without recording the job's end, so its exit code is unknown " +
				"(the machine restarted, the supervisor was killed, or the disk was full even for the space reserved for it)"
			return out, nil
		}
		out.State, out.Raw = backends.Running, "RUNNING"
		out.Message = fmt.Sprintf("running as pid %d", st.PID)
		return out, nil
	}
	out.EndTime = *st.Ended
	out.ExitCode = st.ExitCode
	endedStatus(st, &out)
	return out, nil
}

// endedStatus maps the recorded end of a job onto out's state and message.
func endedStatus(st *state, out *backends.Status) {
	switch {
	case st.Cancelled:
		out.State, out.Raw, out.Message = backends.Killed, "CANCELLED", "cancelled"
	case st.Error != "":
		out.State, out.Raw, out.Reason, out.Message = backends.Failed, "FAILED", "LaunchFailed", "could not start the job: "+st.Error
	case st.Signal != "":
		out.Raw, out.Reason = "SIGNALED", st.Signal
		out.Message = "the job was killed by " + st.Signal
		if st.Signal == "terminated" || st.Signal == "killed" || st.Signal == "interrupt" {
			out.State = backends.Killed // stopped from outside bridge-runner
		} else {
			out.State = backends.Failed
		}
	case st.ExitCode != nil && *st.ExitCode == 0:
		out.State, out.Raw, out.Message = backends.Done, "COMPLETED", "the job exited 0"
	default:
		out.State, out.Raw, out.Reason = backends.Failed, "FAILED", "NonZeroExitCode"
		out.Message = fmt.Sprintf("the job exited %d", derefOr(st.ExitCode, -1))
	}
}

// recheck probes the supervisor again after a state without an end was
// read while no supervisor seemed alive: it may have started between the
// probe and the read. One found gone now recorded its end before it went.
func (b *Backend) recheck(dir string, st *state) (*state, bool) {
	if supervisorAlive(dir) {
		return st, true
	}
	if again, err := b.readState(dir); err == nil {
		return again, false
	}
	return st, false
}

func derefOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

// Cancel asks the supervisor to stop the job: a marker file (seen by a
// supervisor that has not started the job yet) and SIGTERM to the
// supervisor, which stops the job's process group.
func (b *Backend) Cancel(_ context.Context, id string) error {
	if !validKey(id) {
		return fmt.Errorf("local job %q: %w", id, backends.ErrNotFound)
	}
	dir := b.dir(id)
	if _, err := os.Stat(filepath.Join(dir, "job.json")); err != nil {
		return fmt.Errorf("local job %s: %w", id, backends.ErrNotFound)
	}
	if err := os.WriteFile(filepath.Join(dir, "cancel"), nil, 0o600); err != nil {
		return err
	}
	st, err := b.readState(dir)
	if err != nil || st.Ended != nil || !supervisorAlive(dir) {
		return nil // not started (the marker stops it) or already over
	}
	if err := syscall.Kill(st.SupervisorPID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// ReadLogs copies the job's output from offset on.
func (b *Backend) ReadLogs(_ context.Context, id string, offset int64, w io.Writer) (int64, error) {
	if !validKey(id) {
		return offset, backends.ErrNotFound
	}
	f, err := os.Open(filepath.Join(b.dir(id), "output.log"))
	if errors.Is(err, os.ErrNotExist) {
		return offset, nil
	}
	if err != nil {
		return offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	n, err := io.Copy(w, f)
	return offset + n, err
}

// supervisorAlive reports whether a supervisor holds the job's lock.
func supervisorAlive(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Forget removes an ended job's directory (its script, output, state and
// lock). A job whose supervisor still holds the lock is left alone: the
// directory is what keeps it from starting twice.
func (b *Backend) Forget(_ context.Context, id string) error {
	if !validKey(id) {
		return fmt.Errorf("local job %q: %w", id, backends.ErrNotFound)
	}
	dir := b.dir(id)
	if _, err := os.Stat(filepath.Join(dir, "job.json")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if supervisorAlive(dir) {
		return fmt.Errorf("local job %s is still running; its directory %s stays", id, dir)
	}
	return os.RemoveAll(dir)
}
