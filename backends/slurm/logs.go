package slurm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// slurmrestd cannot read files, so the job's output reaches the step's log
// in one of two ways, both chosen by the runner:
//
//   - a shared file system mounted into the pod: OutputPath says where the
//     job's output file is on the cluster, and the runner reads it there;
//   - a log shipper in the job: with Job.LogShip, Submit wraps the batch
//     script so that a background loop PUTs the job's output file to a
//     presigned URL while it runs (see shipScript). The runner reads the
//     object with ranged GETs. No S3 key reaches the cluster.

// ShipsLogs implements backends.LogShipper.
func (b *Backend) ShipsLogs() bool { return true }

// TimeLimit implements backends.TimeLimiter: jobproperties' time_limit,
// when it sets a finite one.
func (b *Backend) TimeLimit(job backends.Job) (time.Duration, bool) {
	spec, err := buildJob(job)
	if err != nil || spec.timeLimit == nil || spec.timeLimit.infinite || spec.timeLimit.minutes == 0 {
		return 0, false
	}
	return time.Duration(spec.timeLimit.minutes) * time.Minute, true
}

// OutputPath implements backends.OutputLocator: the absolute path of the
// job's standard output on the cluster; for an array, its first (lowest)
// task's, the output the step's live log follows (as with the shipper).
func (b *Backend) OutputPath(ctx context.Context, id string) (string, error) {
	j, err := b.getJob(ctx, id)
	if err != nil {
		return "", err
	}
	if isTask(j) || j.ArrayTaskString != "" { // an array's record
		if j, err = b.firstTask(ctx, id); err != nil {
			return "", err
		}
	}
	return absOutputPath(j, id), nil
}

// TaskOutputPath implements backends.TaskOutputLocator: the absolute path
// of the output of array id's task (its index in that array).
func (b *Backend) TaskOutputPath(ctx context.Context, id string, task int) (string, error) {
	jobs, _, err := b.liveRecords(ctx, id)
	if err != nil {
		return "", err
	}
	for i := range jobs {
		if idx, ok := taskIndex(&jobs[i], id); ok && idx == task {
			return absOutputPath(&jobs[i], id), nil
		}
	}
	return "", fmt.Errorf("Slurm array %s: its task %d has not started: %w", id, task, backends.ErrNotFound)
}

// absOutputPath is where job j (of id) writes its output, as an absolute
// path: relative ones are in its working directory.
func absOutputPath(j *jobInfo, id string) string {
	p := outputPath(j, id)
	if !path.IsAbs(p) {
		p = path.Join(cmp.Or(j.WorkingDir, DefaultWorkingDirectory), p)
	}
	return p
}

// shipLogs makes s ship its output: the URL goes into the environment (the
// wrapper takes it out before the job's script runs, and hands it to curl
// in a file only the job's user can read), the script into a wrapper.
func (s *jobSpec) shipLogs(ship backends.LogShip, w wrapping) error {
	if !curlConfigSafe(ship.URL) {
		return errors.New("the log shipper's URL cannot be written in a curl config file")
	}
	s.env["BRIDGE_LOG_URL"] = ship.URL
	w.ship, w.every = true, max(1, int(ship.Every/time.Second))
	if ship.Tasks != nil && w.taskIndex {
		form, err := taskForm(*ship.Tasks)
		if err != nil {
			return err
		}
		s.env["BRIDGE_LOG_FORM"], s.env["BRIDGE_LOG_KEY"] = form, ship.Tasks.KeyPrefix
		w.shipTasks, w.liveTask = true, ship.Tasks.Live
		w.othersEvery = max(w.every, int(ship.Tasks.OthersEvery/time.Second))
	}
	s.script = wrapScript(s.script, w)
	return nil
}

// curlConfigSafe: u can be written as url = "u" in a curl config file, the
// way the job's scripts pass presigned URLs to curl: never on its command
// line, which every user of the node can read in /proc/PID/cmdline. A
// presigned URL is percent-encoded, so this never refuses one.
func curlConfigSafe(u string) bool {
	for i := 0; i < len(u); i++ {
		if c := u[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return u != ""
}

// taskForm is the POST form's fields as the wrapper reads them from
// BRIDGE_LOG_FORM: "name=value" words, in a stable order. Every word and
// the key prefix must survive the wrapper's word splitting (no blanks, no
// glob characters) and curl's config quoting.
func taskForm(t backends.TaskShip) (string, error) {
	names := make([]string, 0, len(t.Fields))
	for n := range t.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	words := make([]string, 0, len(names))
	for _, n := range names {
		w := n + "=" + t.Fields[n]
		if !curlConfigSafe(w) || strings.ContainsAny(w, "*?[") || n == "key" || n == "file" {
			return "", fmt.Errorf("the log shipper's form field %q cannot be passed to the job", n)
		}
		words = append(words, w)
	}
	if !curlConfigSafe(t.KeyPrefix) {
		return "", errors.New("the log shipper's key prefix cannot be written in a curl config file")
	}
	return strings.Join(words, " "), nil
}

// shipScript wraps script (a batch script starting with #!) in a POSIX sh
// batch script that runs it through its #! interpreter and, while it runs,
// ships the job's output file (the wrapper's own standard output, found
// through /proc) to $BRIDGE_LOG_URL every `every` seconds when it grew, and
// once at the end. #SBATCH lines are kept at the top. A cancelled or timed
// out job gets SIGTERM: the wrapper passes it on, waits for the script, and
// still ships the end of the output. The wrapper exits with the script's
// exit status. The upload sends a snapshot of the file's length at the
// time (head -c), so a file that grows during the PUT never makes it fail.
func shipScript(script string, every int) string {
	return wrapScript(script, wrapping{ship: true, every: every})
}

// wrapping says what the wrapper of wrapScript does beside running the
// script: ship the output (shipScript), and set an array task's index.
type wrapping struct {
	ship  bool
	every int // seconds between shipments
	// taskIndex exports backends.TaskIndexVar from SLURM_ARRAY_TASK_ID
	// (Slurm cannot set one variable from another, and the script may be
	// Python); with ship, only the task of index shipTask ships its
	// output, since every task would write the same object.
	taskIndex bool
	shipTask  int
	// shipTasks: every task ships its output, with the POST form of
	// backends.TaskShip, to its own object (see LogShip.Tasks): the task
	// of index liveTask every `every` seconds, the others every
	// othersEvery.
	shipTasks   bool
	liveTask    int
	othersEvery int
	// taskOffset is added to SLURM_ARRAY_TASK_ID to give the task's index
	// in the user's array (a chunk of an array past MaxArraySize runs as
	// indexes from 0); the wrapper then sets SLURM_ARRAY_TASK_ID to that
	// index too, so that a script reading Slurm's own variable sees the
	// index the user gave, not the chunk's.
	taskOffset int
	// end is the absolute path of the job's end marker (Slurm over SSH):
	// on its way out, whatever the script's outcome, the wrapper writes the
	// script's exit status there, owner-only and atomically (a temporary
	// file beside it, renamed), for WaitEnd to see without asking
	// slurmctld. A signal the wrapper traps (scancel's SIGTERM) still gets
	// there: it is passed on, and the wrapper ends as usual once the script
	// has; SIGKILL leaves no marker, and the polls find the end.
	end string
}

// wrapScript wraps script in a POSIX sh batch script that keeps its
// #SBATCH lines and runs it through its #! interpreter, passing SIGTERM on
// and exiting with its exit status; see shipScript.
func wrapScript(script string, w wrapping) string {
	if !strings.HasSuffix(script, "\n") {
		script += "\n"
	}
	sum := sha256.Sum256([]byte(script))
	eof := "BRIDGE_JOB_SCRIPT_" + hex.EncodeToString(sum[:8])
	for strings.Contains(script, eof) {
		eof += "_"
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString(sbatchLines(script))
	b.WriteString("# bridge-runner: runs the job's script (below)")
	if w.ship {
		b.WriteString(` and ships its output to
# the step's log while it runs; see bridge-runner's README, "Logs".
br_url=$BRIDGE_LOG_URL
unset BRIDGE_LOG_URL
`)
		if w.shipTasks {
			b.WriteString("br_form=$BRIDGE_LOG_FORM\nbr_key=$BRIDGE_LOG_KEY\nunset BRIDGE_LOG_FORM BRIDGE_LOG_KEY\n")
		}
	} else {
		b.WriteString(".\n")
	}
	if w.taskIndex {
		if w.taskOffset == 0 {
			b.WriteString("export " + backends.TaskIndexVar + "=$SLURM_ARRAY_TASK_ID\n")
		} else {
			b.WriteString("export " + backends.TaskIndexVar + "=$((SLURM_ARRAY_TASK_ID + " + strconv.Itoa(w.taskOffset) + "))\n" +
				"export SLURM_ARRAY_TASK_ID=$" + backends.TaskIndexVar + "\n")
		}
		if w.ship && !w.shipTasks {
			b.WriteString(`[ "$` + backends.TaskIndexVar + `" = ` + strconv.Itoa(w.shipTask) + " ] || br_url=\n")
		}
	}
	// A cancel may come before the script is started: remembered from the
	// first line on and passed to the script once it runs, so that the
	// wrapper still ends by its own hand (and leaves its end marker).
	b.WriteString(`br_sig=
trap 'br_sig=1' TERM INT HUP
br_dir=$(mktemp -d "${TMPDIR:-/tmp}/bridge-job.XXXXXX") || exit 1
`)
	if w.ship {
		b.WriteString(shipSetup(w))
	}
	b.WriteString(`cat > "$br_dir/script" <<'` + eof + "'\n" + script + eof + `
IFS= read -r br_first < "$br_dir/script"
set -f
${br_first#??} "$br_dir/script" "$@" &
br_job=$!
set +f
trap 'kill -TERM $br_job 2>/dev/null' TERM INT HUP
[ -z "$br_sig" ] || kill -TERM $br_job 2>/dev/null
wait $br_job
br_rc=$?
while kill -0 $br_job 2>/dev/null; do wait $br_job; br_rc=$?; done
`)
	if w.ship {
		b.WriteString("kill $br_loop 2>/dev/null\nwait $br_loop\nbr_ship\n")
	}
	b.WriteString("rm -rf \"$br_dir\"\n")
	if w.end != "" {
		b.WriteString("br_end=" + sshexec.Quote(w.end) + "\n" +
			`( umask 077 && printf '%s\n' "$br_rc" > "$br_end.$$" && mv -f "$br_end.$$" "$br_end" )` + "\n")
	}
	b.WriteString("exit $br_rc\n")
	return b.String()
}

// shipSetup starts the shipping loop of shipScript's wrapper: a PUT to
// one presigned URL, or with tasks a POST of the task's own object (named
// by its index) with the array's presigned form.
func shipSetup(w wrapping) string {
	conf, send := `printf 'url = "%s"\n' "$br_url"`, `-H "Transfer-Encoding:" -H "Content-Length: $br_size" -T - -K "$br_dir/ship.conf"`
	every := "br_every=" + strconv.Itoa(w.every) + "\n"
	if w.shipTasks {
		every = "br_every=" + strconv.Itoa(w.othersEvery) + "\n" +
			`[ "$` + backends.TaskIndexVar + `" = ` + strconv.Itoa(w.liveTask) + " ] && br_every=" + strconv.Itoa(w.every) + "\n"
		conf += `; for br_f in $br_form; do printf 'form-string = "%s"\n' "$br_f"; done; printf 'form-string = "key=%s%s.log"\n' "$br_key" "$` + backends.TaskIndexVar + `"`
		send = `-K "$br_dir/ship.conf" -F "file=@-;type=text/plain"`
	}
	return every + `br_out=$(readlink -f "/proc/$$/fd/1" 2>/dev/null)
# curl reads the URL from a file of this 0700 directory, not from its
# command line: other users of the node can read every process's.
( umask 077; { ` + conf + `; } > "$br_dir/ship.conf" )
br_ship() {
	[ -n "$br_url" ] && [ -f "$br_out" ] || return 0
	br_size=$(wc -c < "$br_out" | tr -d ' ')
	[ "$br_size" = "$(cat "$br_dir/sent" 2>/dev/null)" ] && return 0
	head -c "$br_size" "$br_out" | curl -fsS --retry 2 ` + send + ` >/dev/null 2>&1 &&
		echo "$br_size" > "$br_dir/sent"
}
( trap exit TERM; while :; do sleep $br_every & wait $!; br_ship; done ) &
br_loop=$!
`
}

// sbatchLines are the #SBATCH lines at the top of script (up to the first
// line that is neither a comment nor blank, as sbatch reads them).
func sbatchLines(script string) string {
	var b strings.Builder
	lines := strings.Split(script, "\n")
	for _, l := range lines[1:] {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		if strings.HasPrefix(t, "#SBATCH") {
			b.WriteString(t + "\n")
		}
	}
	return b.String()
}

var (
	_ backends.LogShipper        = (*Backend)(nil)
	_ backends.TimeLimiter       = (*Backend)(nil)
	_ backends.OutputLocator     = (*Backend)(nil)
	_ backends.TaskOutputLocator = (*Backend)(nil)
)

// isTask: j is an array task's own record.
func isTask(j *jobInfo) bool {
	_, ok := number(j.ArrayTaskID)
	return ok
}

// firstTask is the record of array id's lowest task. Until that task has
// started it has no record of its own (its output file's name is not
// known yet: %j is the task's own id): ErrNotFound, which the runner reads
// as no output yet, and asks again.
func (b *Backend) firstTask(ctx context.Context, id string) (*jobInfo, error) {
	jobs, _, err := b.liveRecords(ctx, id)
	if err != nil {
		return nil, err
	}
	return firstTaskOf(jobs, id)
}

// firstTaskOf picks array id's lowest task among its records jobs.
func firstTaskOf(jobs []jobInfo, id string) (*jobInfo, error) {
	var first *jobInfo
	low, waiting := -1, -1
	for i := range jobs {
		if idx, ok := taskIndex(&jobs[i], id); ok {
			if first == nil || idx < low {
				first, low = &jobs[i], idx
			}
		} else if jobs[i].baseID() == id && jobs[i].ArrayTaskString != "" {
			if a, err := backends.ParseArray(jobs[i].ArrayTaskString); err == nil && len(a.Ranges) > 0 {
				waiting = a.Ranges[0].First
			}
		}
	}
	if first == nil || (waiting >= 0 && waiting < low) {
		return nil, fmt.Errorf("Slurm array %s: its first task has not started: %w", id, backends.ErrNotFound)
	}
	return first, nil
}
