package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// superviseEnv, when set to a job directory, makes this program act as that
// job's supervisor instead of its usual self (see RunSupervisorIfRequested).
const superviseEnv = "BRIDGE_LOCAL_SUPERVISE"

// killAfter is how long the job gets between SIGTERM and SIGKILL on cancel.
const killAfter = 10 * time.Second

// RunSupervisorIfRequested must be called first thing in main (and in
// TestMain of tests that run local jobs). When this process was started as a
// supervisor it runs the job, records its end, and exits; otherwise it
// returns at once.
func RunSupervisorIfRequested() {
	dir := os.Getenv(superviseEnv)
	if dir == "" {
		return
	}
	os.Exit(supervise(dir))
}

// supervise runs the job in dir at most once, ever: it holds the job's lock
// while it lives, and a state.json present means some supervisor already
// started the job.
func supervise(dir string) int {
	// The job inherits this umask: what it writes is its user's only,
	// whatever umask the process that ran invoke had (often 022).
	syscall.Umask(0o077)
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 1
	}
	// The lock must live as long as this supervisor: without this close at
	// return, the garbage collector may finalize the unreachable *os.File,
	// closing its fd and so dropping the lock while the job still runs.
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0 // another supervisor has it
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		return 0 // already started once
	}
	// Take the signals before anything can be started, so a cancel that
	// arrives now is not lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	st := &state{SupervisorPID: os.Getpid(), Started: time.Now().UTC()}
	// Reserve room for the end before the job can fill the disk.
	_ = reserveEnd(dir)
	end := func(code int) int {
		now := time.Now().UTC()
		st.Ended = &now
		if !writeEnd(dir, st) {
			return 1
		}
		return code
	}
	if _, err := os.Stat(filepath.Join(dir, "cancel")); err == nil {
		st.Cancelled = true
		return end(0)
	}
	sp, err := readSpec(dir)
	if err != nil {
		st.Error = err.Error()
		return end(0)
	}
	out, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		st.Error = err.Error()
		return end(0)
	}
	defer out.Close()
	cmd := jobCommand(dir, sp, out)
	if err := cmd.Start(); err != nil {
		st.Error = err.Error()
		return end(0)
	}
	st.PID = cmd.Process.Pid
	if err := writeState(dir, st); err != nil {
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		return 1
	}
	waitJob(dir, st, cmd, sigs)
	return end(0)
}

// readSpec reads the job's description as the launcher wrote it.
func readSpec(dir string) (spec, error) {
	var sp spec
	buf, _, err := backends.ReadLocalFile(filepath.Join(dir, "job.json"), maxJobFile)
	if err == nil {
		err = json.Unmarshal(buf, &sp)
	}
	if err == nil && len(sp.Command) == 0 {
		err = errors.New("job.json has no command")
	}
	return sp, err
}

// jobCommand prepares the job's process, its output appended to out.
func jobCommand(dir string, sp spec, out *os.File) *exec.Cmd {
	cmd := exec.Command(sp.Command[0], sp.Command[1:]...)
	cmd.Dir = dir
	if sp.Workdir != "" {
		cmd.Dir = sp.Workdir
	}
	cmd.Env = append(os.Environ(), sp.Env...)
	cmd.Env = append(cmd.Env, "BRIDGE_JOB_DIR="+dir)
	cmd.Stdout, cmd.Stderr = out, out
	// The job gets a process group of its own, so cancel reaches everything
	// it started and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// waitJob waits for the started job to end, passing a signal to its group
// as SIGTERM (SIGKILL killAfter later), and records how it ended in st.
func waitJob(dir string, st *state, cmd *exec.Cmd, sigs <-chan os.Signal) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var escalate <-chan time.Time
	for {
		select {
		case <-sigs:
			if _, err := os.Stat(filepath.Join(dir, "cancel")); err == nil {
				st.Cancelled = true
			}
			_ = syscall.Kill(-st.PID, syscall.SIGTERM)
			escalate = time.After(killAfter)
		case <-escalate:
			_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		case <-done:
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				st.Signal = ws.Signal().String()
			} else {
				code := ws.ExitStatus()
				st.ExitCode = &code
			}
			// Stragglers in the group (background children) go with the job.
			_ = syscall.Kill(-st.PID, syscall.SIGKILL)
			return
		}
	}
}

func writeState(dir string, st *state) error {
	buf, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf("state.json.%d", os.Getpid()))
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}
