package main

import (
	"errors"
	"fmt"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// Exit codes of bridge-runner: the record's contract (record.Exit*), named
// here as the commands use them.
const (
	ExitDone     = record.ExitDone
	ExitFailed   = record.ExitFailed
	ExitInvalid  = record.ExitInvalid
	ExitKilled   = record.ExitKilled
	ExitUnknown  = record.ExitUnknown
	ExitInfra    = record.ExitInfra
	ExitTempFail = record.ExitTempFail
)

// exitCode is the one place where outcomes become exit codes: a job's final
// state, or a fault through faultTable.
func exitCode(res *runner.Result, err error) int {
	if err != nil {
		return faultRowOf(err).Exit
	}
	if res == nil {
		return ExitDone
	}
	// The state table's code; a state not final means following stopped
	// early (75).
	return record.ExitCode(backends.State(res.Status), backends.Category(res.FailureCategory))
}

// usageError marks command-line mistakes (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{e.err, backends.ErrInvalid} }

// faultRow is one class of fault: what the README's fault table says about
// it, how to recognize it, and its exit code.
type faultRow struct {
	Fault string // the README's words for it
	Exit  int
	Do    string // what to do about it
	Match func(error) bool
}

func classIs(class string) func(error) bool {
	return func(err error) bool { return record.FaultClass(err) == class }
}

// faultTable classifies every failure that stops a step: the first row that
// matches decides. Permanent faults (no retry can mend them) exit 2, at
// once; transient ones exit 75 after the retry budget, and a retry
// re-attaches. The README's fault table is this table (TestFaultTableInREADME).
var faultTable = []faultRow{
	{"a fault of an exit-2 row below (but the edited `id`) that comes once the job was submitted (a credentials file gone mid-job, a certificate no longer trusted): the job goes on, so it is no \"nothing was submitted\"", ExitTempFail,
		"mend what the message names, then retry the step: it re-attaches (never resubmits); or cancel the job with cleanup", func(err error) bool {
			var sf *runner.SubmittedFault
			return errors.As(err, &sf)
		}},
	{"Kubernetes forbids a request (RBAC); the message names the verb and resource", ExitInvalid,
		"bind the Role in `workflows/rbac` to the pod's ServiceAccount (`kubectl apply -k workflows/rbac`, `serviceAccountName: bridge-runner`)",
		classIs(record.FaultForbidden)},
	{"the namespace is not a valid name or does not exist", ExitInvalid,
		"fix `--namespace` (or `NAMESPACE`)", classIs(record.FaultNamespace)},
	{"the job name cannot name the ConfigMap `<job>-bridge-cm` or the state file", ExitInvalid,
		fmt.Sprintf("lower-case letters, digits, `-` and `.`, a letter or digit at both ends and around every `.`, at most %d characters", record.MaxJobNameLen),
		classIs(record.FaultJobName)},
	{"the state dir, the record or its lock is not a writable directory or file; the record is not a regular file (a FIFO, a device), or is owned by another user or writable by everyone (anyone could forge its id or kill flag)", ExitInvalid,
		"point `--state-dir` at a writable directory of your own; check a foreign record, then `chown` or `chmod o-w` it (or delete it)", classIs(record.FaultStateDir)},
	{"`resourceURL` or `s3.endpoint` carries `user:password@`, has no host, a host longer than 253 characters or beginning with `-`, or a port that is empty or out of range", ExitInvalid,
		"remove the user info (credentials belong in the mounted Secret); give a host name and a port from 1 to 65535", classIs(record.FaultURL)},
	{"TLS verification failed; the message and the record name the certificate problem", ExitInvalid,
		"give the CA with `--ca-file`, or fix the server's certificate", classIs(record.FaultTLS)},
	{"a negative, NaN, overflowing or absurd duration (`--grace-period`, `--submit-lease`, `--retry-budget`, `--wait`, `updateInterval`; `updateInterval` in seconds is decimal only, not `0x1p4`, `1_000` or `1e3`)", ExitInvalid,
		"give a duration within the range the message names", classIs(record.FaultDuration)},
	{fmt.Sprintf("a credentials file is larger than %d KiB, is not a regular file (a FIFO, a device), or a one-line credential holds a newline, NUL or other control character", runner.MaxCredentialFileBytes>>10), ExitInvalid,
		"mount the right Secret; a credential is a short value (make it with `--from-literal`, or `printf '%s'`, not `echo -e`)", classIs(record.FaultCredentials)},
	{"the record's `id` is not the job this record submitted (edited by hand)", ExitInvalid,
		"restore the `id`, or run cleanup and start again", classIs(record.FaultRecordID)},
	{"any other invalid flag, job description or record key; the message names it", ExitInvalid,
		"fix what the message names; nothing was submitted", func(err error) bool { return errors.Is(err, backends.ErrInvalid) }},
	{"connection refused, timeout, HTTP 5xx or 429 (whatever the body says), a malformed answer, Kubernetes API or S3 endpoint unavailable, disk full, pod evicted", ExitTempFail,
		"nothing: retry the step (a retry re-attaches, never resubmits)", func(err error) bool { return errors.Is(err, backends.ErrTransient) }},
	{"anything else that stopped invoke before the job's end", ExitTempFail,
		"read the message; a retry re-attaches", func(error) bool { return true }},
}

// faultRowOf returns the row of faultTable that err falls in.
func faultRowOf(err error) faultRow {
	for _, r := range faultTable {
		if r.Match(err) {
			return r
		}
	}
	return faultTable[len(faultTable)-1]
}
