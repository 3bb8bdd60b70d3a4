package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Result is what invoke reports: the step outputs (one file per field, the
// paths given by --output-<name> flags) and the final JSON summary line.
type Result struct {
	Job             string   `json:"job"`
	ID              string   `json:"id" output:"job-id" help:"the remote job id"`
	Status          string   `json:"status" output:"status" help:"the final state: DONE, FAILED, KILLED or UNKNOWN; empty if none was reached"`
	Message         string   `json:"message" output:"message" help:"what happened, in one line"`
	BackendState    string   `json:"backendState,omitempty" output:"backend-state" help:"the backend's own final state, e.g. TIMEOUT"`
	ExitCode        string   `json:"jobExitCode,omitempty" output:"job-exit-code" help:"the job's own exit code, when the backend reports it"`
	FailureCategory string   `json:"failureCategory,omitempty" output:"failure-category" help:"whose doing a FAILED or KILLED end was: job, infrastructure, timeout or cancelled; empty otherwise"`
	SubmitTime      string   `json:"submitTime,omitempty" output:"submit-time" help:"RFC 3339"`
	StartTime       string   `json:"startTime,omitempty" output:"start-time" help:"RFC 3339"`
	EndTime         string   `json:"endTime,omitempty" output:"end-time" help:"RFC 3339"`
	Outputs         []string `json:"outputs,omitempty" output:"outputs" help:"locations of uploaded outputs, one per line"`
	Attempt         string   `json:"attempt,omitempty" output:"attempt" help:"the attempt number: 1, more once a retry of the step submitted new attempts after failures (see status.attempts)"`
	ArrayCounts     string   `json:"arrayCounts,omitempty" output:"array-counts" help:"for a job array: its tasks by final state, e.g. DONE=950 FAILED=50"`
	ArrayFailed     string   `json:"arrayFailed,omitempty" output:"array-failed" help:"for a job array: the indexes of the tasks that did not end DONE, as ranges (3,17-19): give them as array to a retry of only those"`
	Target          string   `json:"target,omitempty" output:"target" help:"for a job with targets: the name of the target placement chose (status.placement says why)"`
	Efficiency      string   `json:"efficiency,omitempty" output:"efficiency" help:"what the job used against what it asked, from the system's accounting, as JSON: cpu, memory and time (fractions), queueWaitSeconds, the raw figures, or unavailable with the reason (see status.efficiency)"`
	Exit            int      `json:"exit"`
}

// OutputField describes one step output.
type OutputField struct {
	Name  string // output name; its flag is --output-<Name>
	Help  string
	index int
}

// Flag is the CLI flag that takes the output's file path.
func (o OutputField) Flag() string { return "output-" + o.Name }

// OutputName is the KFP output and Argo output parameter name.
func (o OutputField) OutputName() string { return record.Snake(o.Name) }

// OutputFields lists Result's step outputs.
var OutputFields = func() []OutputField {
	t := reflect.TypeOf(Result{})
	var out []OutputField
	for i := 0; i < t.NumField(); i++ {
		if n := t.Field(i).Tag.Get("output"); n != "" {
			out = append(out, OutputField{Name: n, Help: t.Field(i).Tag.Get("help"), index: i})
		}
	}
	return out
}()

func (o OutputField) value(r *Result) string {
	v := reflect.ValueOf(r).Elem().Field(o.index)
	if v.Kind() == reflect.Slice {
		s := ""
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				s += "\n"
			}
			s += v.Index(i).String()
		}
		return s
	}
	return v.String()
}

// WriteOutputs writes each output whose path is set in paths (output name →
// file). Parent directories are created (plain Argo does not create them);
// each file is written atomically and without a trailing newline. A
// directory this user may not write is named once, with the fix.
func WriteOutputs(r *Result, paths map[string]string) error {
	var errs []error
	denied := ""
	for _, o := range OutputFields {
		p := paths[o.Name]
		if p == "" {
			continue
		}
		if err := writeAtomic(p, []byte(o.value(r))); err != nil {
			errs = append(errs, fmt.Errorf("output %s: %w", o.Name, err))
			if denied == "" && errors.Is(err, fs.ErrPermission) {
				denied = filepath.Dir(p)
			}
		}
	}
	if denied != "" {
		errs = append(errs, fmt.Errorf("this step runs as uid %d, which may not write beneath %s: make that directory writable for it (under KFP's local DockerRunner: the pipeline root, see the README)", os.Geteuid(), denied))
	}
	return errors.Join(errs...)
}

func writeAtomic(path string, data []byte) error {
	if err := mkdirOutput(filepath.Dir(path)); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// mkdirOutput creates dir and its missing parents, 0755, except beneath a
// directory that every user may write and that has no sticky bit (KFP's
// local pipeline root opened to the image's user): there a new directory
// takes its parent's permissions, so that the pipeline root's owner, who is
// not this step's user, can still remove what the step wrote.
func mkdirOutput(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(dir)
	if parent == dir {
		return err
	}
	if err := mkdirOutput(parent); err != nil {
		return err
	}
	pfi, err := os.Stat(parent)
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o755)
	if pm := pfi.Mode(); pm&0o002 != 0 && pm&fs.ModeSticky == 0 {
		mode = pm.Perm()
	}
	if err := os.Mkdir(dir, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile by another writer
		}
		return err
	}
	return os.Chmod(dir, mode) // past the umask
}

// Summary is the one JSON line invoke prints on stdout.
func (r *Result) Summary() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// fill copies a backend status into the result.
func (r *Result) fill(st backends.Status) {
	r.Status = string(st.State)
	r.BackendState = st.Raw
	r.Message = st.Message
	r.FailureCategory = string(st.FailureCategory())
	r.ExitCode = ""
	if st.ExitCode != nil {
		r.ExitCode = strconv.Itoa(*st.ExitCode)
	}
	r.SubmitTime, r.StartTime, r.EndTime = rfc3339(st.SubmitTime), rfc3339(st.StartTime), rfc3339(st.EndTime)
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
