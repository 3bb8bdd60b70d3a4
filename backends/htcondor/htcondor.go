// Package htcondor runs jobs on an HTCondor pool through its commands on a
// login node (a submit host) reached over SSH: HTCondor has no HTTP API to
// submit with (htcondor-restd only reads).
//
// resourceURL is ssh://USER@LOGIN-NODE[:PORT][/DIRECTORY]; the credentials
// are those of package sshexec (ssh-privatekey, known_hosts, optional
// ssh-certificate). Each job gets a directory DIRECTORY/<key> on the login
// node (DIRECTORY defaults to bridge-runner in the user's home) holding its
// script (job.sh), its input files, parameters.json and metadata.json, and,
// as HTCondor writes them, job.out, job.err and the event log job.log.
//
// The submit description is built from jobproperties, a JSON object of
// submit commands: request_cpus, request_memory, request_disk, universe
// (vanilla by default), requirements, rank, and any other; keys written
// +Name or MY.Name are job attributes (a JSON string becomes a ClassAd
// string, numbers and booleans stay literal). bridge-runner writes
// executable, output, error, log, initialdir, environment and queue
// itself, and refuses them in jobproperties, as it refuses any value with a
// line break (it would start a submit command of its own). By default input
// and output files are transferred (should_transfer_files = YES, no shared
// file system assumed) and the output is streamed, so that it can be read
// while the job runs. The job gets BRIDGE_JOB_NAME, BRIDGE_JOB_KEY and, when
// set, BRIDGE_JOB_PARAMETERS_FILE and BRIDGE_SCRIPT_METADATA_FILE (file
// names in its working directory; HTCondor would expand $(...) inside values
// put in the environment).
//
// The idempotency key is the job attribute BridgeRunnerKey; FindByKey looks
// for it in condor_q, then in condor_history. The job id is
// "<ClusterId>.<ProcId>".
//
// States (JobStatus): Idle is PENDING, Running and Transferring Output are
// RUNNING, Suspended is SUSPENDED, Removed is KILLED (RemoveReason kept),
// Completed is DONE with exit code 0 and FAILED otherwise (128+n for signal
// n). An idle job the negotiator did not match carries its
// LastRejMatchReason ("no match found": no machine meets its requirements)
// as the reason. Held: a job held by a person (condor_hold, HoldReasonCode
// 1) or submitted on hold (15) waits for condor_release: PENDING if it
// never started, SUSPENDED if it had; any
// other hold is HTCondor giving up on the job (its executable could not be
// started, a file could not be transferred, a policy fired): FAILED, with
// HoldReason as the message and "HoldReasonCode N.S" as the reason. Such a
// job stays held in the queue for inspection (cleanup leaves ended jobs
// alone): remove it with condor_rm, or release it after fixing the cause,
// which a retry of the step will not see (it re-attaches to a FAILED job).
//
// StatusMany (a cluster's watcher) reads many jobs' ads with one condor_q
// of all their ids and one condor_history of those that left the queue.
//
// Cancel is condor_rm; a job no longer in the queue, or removed and still
// leaving it, is not an error.
//
// Job arrays (SubmitArray): one cluster whose procs are the tasks, queued
// with `queue TaskIndex from (...)` over the array's indexes, so any index
// set runs as written; each proc carries its index in BRIDGE_TASK_INDEX
// and the attribute BridgeTaskIndex, and writes task-<index>.out and .err.
// %M is max_materialize: at most M of the cluster's procs are in the
// queue at once (a held task keeps its place until removed). The array's
// id is the cluster id, "123"; Cancel, Status (the tasks folded) and
// FindByKey take it, and ArrayStatus reads the tasks with one condor_q of
// the cluster and one condor_history of those that left the queue.
package htcondor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// Name is the backend's registry name.
const Name = "htcondor"

// Backend drives one HTCondor submit host over one SSH connection.
type Backend struct {
	ssh *sshexec.Client
	log *slog.Logger

	mu     sync.Mutex
	iwd    map[string]string    // job or array id → its directory, for logs and outputs
	arrays map[string]arrayInfo // array id → its size and first index

	queries atomic.Int64 // condor_q and condor_history commands run, for tests
}

// New builds the backend; it connects on first use.
func New(cfg backends.Config) (backends.Backend, error) {
	if !sshexec.IsSSH(cfg.URL) {
		return nil, backends.Invalid("resourceURL", "%q: HTCondor is reached over SSH; use ssh://USER@SUBMIT-HOST[:PORT][/DIRECTORY]", cfg.URL)
	}
	c, log, err := sshexec.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Backend{ssh: c, log: log, iwd: map[string]string{}, arrays: map[string]arrayInfo{}}, nil
}

// Close closes the SSH connection.
func (b *Backend) Close() error { return b.ssh.Close() }

// Validate checks the job and the credentials without connecting.
func (b *Backend) Validate(job backends.Job) error {
	if _, err := buildSubmit(job); err != nil {
		return err
	}
	return b.ssh.Check()
}

// StagesInputs: additionalData is uploaded into the job's directory and
// transferred with the job.
func (b *Backend) StagesInputs() bool { return true }

var submitted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+)\.(\d+) - \d+\.\d+$`) })

// Submit writes the job's files and submits it with condor_submit.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	out, dir, err := b.condorSubmit(ctx, job, nil)
	if err != nil {
		return "", err
	}
	m := submitted().FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("condor_submit printed no job id (%d bytes, not shown)", len(out))
	}
	id := m[1] + "." + m[2]
	b.remember(id, dir)
	return id, nil
}

// condorSubmit writes the job's files into its directory and runs
// condor_submit -terse on the job's description (the array a's, if not
// nil); it returns what condor_submit printed, trimmed, and the directory.
func (b *Backend) condorSubmit(ctx context.Context, job backends.Job, a *backends.Array) (string, string, error) {
	spec, err := buildSubmit(job)
	if err != nil {
		return "", "", err
	}
	dir, err := b.ssh.JobDir(ctx, job.Key)
	if err != nil {
		return "", "", err
	}
	if err := b.upload(ctx, dir, spec, job.Inputs); err != nil {
		return "", "", err
	}
	if err := b.createOutputs(ctx, dir, outputs(a)); err != nil {
		return "", "", err
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"condor_submit", "-terse", "-"}, Stdin: strings.NewReader(spec.arrayDescription(dir, job.Key, a))})
	if err != nil {
		return "", "", err
	}
	if res.ExitCode != 0 {
		return "", "", b.ssh.CommandError(condor, "condor_submit", res, "jobproperties")
	}
	return strings.TrimSpace(string(res.Stdout)), dir, nil
}

// upload writes the script, parameters, metadata and input files into the
// job's directory, which only the login user may enter: the files are the
// job's own (parameters may hold secrets), not the other users' of the node.
func (b *Backend) upload(ctx context.Context, dir string, spec *submitSpec, inputs []backends.InputFile) error {
	if err := b.ssh.MkdirAll(ctx, dir, 0o700); err != nil {
		return err
	}
	if spec.script != "" {
		if err := b.ssh.WriteFile(ctx, path.Join(dir, scriptFile), strings.NewReader(spec.script), 0o700); err != nil {
			return err
		}
	}
	if err := b.ssh.WriteFile(ctx, path.Join(dir, runFile), strings.NewReader(spec.run()), 0o700); err != nil {
		return err
	}
	for _, f := range spec.files {
		if err := b.ssh.WriteFile(ctx, path.Join(dir, f.name), bytes.NewReader(f.data), 0o600); err != nil {
			return err
		}
	}
	for _, in := range inputs {
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

// createOutputs creates the files HTCondor will write in dir (the job's
// output, error and event log), empty and its owner's only: the shadow
// creates a missing one with its own umask (0644, whatever condor_submit's
// was), and keeps the mode of one that exists (the job's directory is
// new, or a retry's, whose files were made here). One command for all, the
// names on its standard input: an array's may be thousands.
func (b *Backend) createOutputs(ctx context.Context, dir string, names []string) error {
	script := `umask 077 && cd "$1" && while IFS= read -r f; do : >>"$f" || exit 1; done`
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sh", "-c", script, "sh", dir}, Stdin: strings.NewReader(strings.Join(names, "\n") + "\n")})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("creating the job's output files in %s on the submit host failed (exit %d; %d bytes of output, not shown)", dir, res.ExitCode, len(res.Stderr)+len(res.Stdout))
	}
	return nil
}

// condor is HTCondor as its commands on a submit host show it.
// condor: HTCondor's tools write an error as "ERROR: <reason>" (or
// "Error: "), condor_rm a job it lacks as "Job <id> not found" or
// "Couldn't find/remove all jobs ...", and one removed but still in the
// queue (its shadow ending the job, up to KILLING_TIMEOUT) as "Job <id>
// already marked for removal", exit 1 (23.9 and 25 alike).
var condor = sshexec.System{Host: "an HTCondor submit host", Controller: "the schedd",
	Unreachable: []string{"Can't find address", "Failed to connect", "Could not connect", "Failed to fetch ads",
		"Error: Couldn't contact", "Failed to end classad message", "SECMAN", "timed out", "Connection refused"},
	Errors: []*regexp.Regexp{regexp.MustCompile(`^(?:ERROR|Error):? (.+)$`), regexp.MustCompile(`^(Job [0-9.]+ not found|Job [0-9.]+ already marked for removal|Couldn't find/remove all jobs .+)$`),
		regexp.MustCompile(`^-- (Failed to fetch ads from: .+)$`)}}

func (b *Backend) remember(id, dir string) {
	if dir == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.iwd[id] = dir
}

var jobID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+\.\d+$`) })

// ads runs condor_q (or condor_history) for one job id or a constraint.
func (b *Backend) ads(ctx context.Context, history bool, selector ...string) ([]*jobAd, error) {
	limit := 0
	if history {
		limit = 1
	}
	return b.query(ctx, history, limit, selector...)
}

// query runs condor_q, or condor_history stopping after limit ads, for
// the job ids or the constraint in selector: one remote command.
func (b *Backend) query(ctx context.Context, history bool, limit int, selector ...string) ([]*jobAd, error) {
	args := []string{"condor_q"}
	if history {
		args = []string{"condor_history", "-limit", strconv.Itoa(limit)}
	}
	args = append(args, "-json", "-attributes", adAttributes)
	args = append(args, selector...)
	b.queries.Add(1)
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: args})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		err := b.ssh.CommandError(condor, args[0], res, "id")
		if res.ExitCode != 127 {
			err = backends.Transient(err) // a query of ours cannot be bad input
		}
		return nil, err
	}
	return parseAds(res.Stdout)
}

// find returns the ad of the job matching selector, in the queue or, once
// it left, in the history; nil if neither knows it.
func (b *Backend) find(ctx context.Context, selector ...string) (*jobAd, error) {
	for _, history := range []bool{false, true, false} { // again: it may leave the queue between the two
		ads, err := b.ads(ctx, history, selector...)
		if err != nil {
			return nil, err
		}
		if len(ads) > 0 {
			b.remember(ads[0].id(), ads[0].Iwd)
			return ads[0], nil
		}
	}
	return nil, nil
}

// Status reads the job's ad.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	if clusterID().MatchString(id) {
		return b.clusterStatus(ctx, id)
	}
	if !jobID().MatchString(id) {
		return backends.Status{}, fmt.Errorf("%q is not an HTCondor job id (CLUSTER.PROC) or array id (CLUSTER): %w", id, backends.ErrNotFound)
	}
	ad, err := b.find(ctx, id)
	if err != nil {
		return backends.Status{}, err
	}
	if ad == nil {
		return backends.Status{}, fmt.Errorf("HTCondor job %s is neither in condor_q nor in condor_history: %w", id, backends.ErrNotFound)
	}
	return ad.status(), nil
}

// maxPerQuery bounds the ids of one condor_q or condor_history command
// line (about 8 bytes each): a longer list is split into a few queries.
const maxPerQuery = 1000

// StatusMany reads the ads of many jobs with one condor_q for all of them,
// then one condor_history for those no longer in the queue: two remote
// commands (one when every job is queued) per maxPerQuery ids, whatever
// their number. States are those of Status (the same ads, the same
// mapping). An id that is not CLUSTER.PROC, or that neither command
// reports (unknown, or leaving the queue between the two), is left out.
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	var valid []string
	seen := map[string]bool{}
	for _, id := range ids {
		if jobID().MatchString(id) && !seen[id] {
			seen[id] = true
			valid = append(valid, id)
		}
	}
	out := make(map[string]backends.Status, len(valid))
	for len(valid) > 0 {
		chunk := valid[:min(len(valid), maxPerQuery)]
		valid = valid[len(chunk):]
		if err := b.statusChunk(ctx, chunk, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// statusChunk adds to out the statuses of ids found in condor_q, then in
// condor_history.
func (b *Backend) statusChunk(ctx context.Context, ids []string, out map[string]backends.Status) error {
	queued, err := b.query(ctx, false, 0, ids...)
	if err != nil {
		return err
	}
	b.collect(queued, ids, out)
	var gone []string
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	// The limit stops the scan of the history files once every job is
	// found; each left the queue once, so it has one ad there.
	ended, err := b.query(ctx, true, len(gone), gone...)
	if err != nil {
		return err
	}
	b.collect(ended, gone, out)
	return nil
}

// collect adds the statuses of the ads that are among ids to out (an ad
// already there, from the queue, is the newer).
func (b *Backend) collect(ads []*jobAd, ids []string, out map[string]backends.Status) {
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	for _, ad := range ads {
		id := ad.id()
		if _, done := out[id]; asked[id] && !done {
			b.remember(id, ad.Iwd)
			out[id] = ad.status()
		}
	}
}

// FindByKey finds the job carrying key in BridgeRunnerKey: an array's
// task (it has BridgeTaskIndex) stands for its array, the cluster.
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	ad, err := b.find(ctx, "-constraint", keyAttr+" == "+classAdString(key))
	if err != nil || ad == nil {
		return "", err
	}
	if ad.TaskIndex != nil {
		id := strconv.FormatInt(ad.ClusterID, 10)
		b.remember(id, ad.Iwd)
		return id, nil
	}
	return ad.id(), nil
}

// Cancel removes the job, or every task of an array (condor_rm CLUSTER),
// with condor_rm.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !jobID().MatchString(id) && !clusterID().MatchString(id) {
		return fmt.Errorf("%q is not an HTCondor job id (CLUSTER.PROC) or array id (CLUSTER)", id)
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"condor_rm", id}})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 || res.Says("not found") || res.Says("already marked for removal") {
		return nil // removed, no longer in the queue (it has ended), or REMOVED and leaving it
	}
	if clusterID().MatchString(id) && res.Says("Couldn't find") && b.arrayEnded(ctx, id) {
		return nil // an array whose tasks all left the queue
	}
	return backends.Transient(fmt.Errorf("condor_rm %s (exit %d): %s", id, res.ExitCode, condor.Said("condor_rm", res)))
}

// StatusManyRequests implements backends.BatchCoster: one condor_q (and at
// most one condor_history) per maxPerQuery ids.
func (b *Backend) StatusManyRequests(n int) int { return backends.Chunks(n, maxPerQuery) }
