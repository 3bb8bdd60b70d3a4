package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// stateChunk is how many ids one GET jobs/state/ asks for. Each goes in a
// job_id=N of its own (24.11 answers the comma-separated form that its
// OpenAPI document describes with 400 "Unable to parse query."), so 200
// ids of up to 10 digits make a query of at most 3.6 KB: within the 8 KB
// request line that proxies and servers commonly take. A longer list costs
// one request per 200 ids.
const stateChunk = 200

// jobStates: from v0.0.40 on, slurmrestd serves GET jobs/state/, which asks
// slurmctld for the state alone of the jobs named (REQUEST_JOB_STATE), not
// for their whole records as GET jobs/ does.
func (v apiVersion) jobStates() bool { return v >= 40 }

// jobStatesResponse is GET jobs/state/: {"jobs":[{"job_id":"5",
// "state":["PENDING"]}]} (job_id a string, state base state plus flags);
// ids slurmctld does not know are left out.
type jobStatesResponse struct {
	Jobs []struct {
		JobID json.RawMessage `json:"job_id"`
		State json.RawMessage `json:"state"`
	} `json:"jobs"`
}

// StatusMany implements backends.StatusBatcher: one GET jobs/state/ per 200
// ids where the API has it (v0.0.40+), else one GET jobs/ for them all. A
// job slurmctld no longer knows is left out (Status reads accounting).
//
// jobs/state/ carries no state_reason, and a held job (PENDING, reason
// JobHeldUser or JobHeldAdmin) is SUSPENDED to Status: it reports such a
// job PENDING, a summary coarser than Status (see backends.StatusBatcher;
// the job's invoke confirms with Status, one request, never a wrong
// record). Leaving pending jobs out instead left most jobs of a busy
// cluster to poll for themselves (the watcher benchmark: 18.5 requests a
// job at N=100 against 19.4 without the watcher); asking GET jobs/ for
// them would pack every job of the cluster (11 KB a job at v0.0.42).
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	want := batchIDs(ids, validID)
	out := map[string]backends.Status{}
	if len(want) == 0 {
		return out, nil
	}
	v, err := b.version(ctx)
	if err != nil {
		return nil, err
	}
	if !v.jobStates() || b.noJobStates.Load() == int32(v) {
		return b.listStatuses(ctx, want, out)
	}
	for chunk := range slices.Chunk(want, stateChunk) {
		served, err := b.stateStatuses(ctx, chunk, out)
		if err != nil {
			return nil, err
		}
		if !served {
			b.noJobStates.Store(int32(v))
			return b.listStatuses(ctx, want, out)
		}
	}
	return out, nil
}

// StatusManyRequests implements backends.BatchCoster: one GET jobs/state/
// per stateChunk ids, or one GET jobs/ where the API has no jobs/state/.
func (b *Backend) StatusManyRequests(n int) int {
	b.ver.mu.Lock()
	v := b.ver.v
	b.ver.mu.Unlock()
	if v != 0 && (!v.jobStates() || b.noJobStates.Load() == int32(v)) {
		return 1
	}
	return backends.Chunks(n, stateChunk)
}

// batchIDs is ids without duplicates and without those valid refuses (they
// must not reach a URL or a command line), in their order.
func batchIDs(ids []string, valid func(string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if valid(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// stateStatuses asks GET jobs/state/ for ids and puts what it reports into
// out, but for the jobs whose state the missing state_reason may change
// (see StatusMany). served is false when slurmrestd does not serve the
// endpoint at this version (a plain 404: a release before 24.05 may lack
// it), for the caller to fall back on GET jobs/.
func (b *Backend) stateStatuses(ctx context.Context, ids []string, out map[string]backends.Status) (served bool, err error) {
	q := url.Values{"job_id": ids}
	endpoint := b.apiPath("jobs/state/")
	r, err := b.do(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	r.path = endpoint // messages name the endpoint, not 200 ids
	switch {
	case r.status == http.StatusNotFound && !r.json:
		return false, nil
	case r.notFound():
		return true, nil // none of them is known
	case r.status != http.StatusOK:
		return false, b.classify(ctx, r, "")
	}
	var sr jobStatesResponse
	if err := json.Unmarshal(r.body, &sr); err != nil {
		return false, fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	for _, j := range sr.Jobs {
		id := (&jobInfo{JobID: j.JobID}).id()
		if !slices.Contains(ids, id) {
			continue // an array's or het job's part, or not asked for
		}
		out[id] = summaryStatus(id, states(j.State), "")
	}
	return true, nil
}

// listStatuses reads GET jobs/ once and sets out[id] for each of ids it
// lists; it returns out, or nil with an error.
func (b *Backend) listStatuses(ctx context.Context, ids []string, out map[string]backends.Status) (map[string]backends.Status, error) {
	r, err := b.do(ctx, http.MethodGet, b.apiPath("jobs/"), nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, b.classify(ctx, r, "")
	}
	var jr jobsResponse
	if err := json.Unmarshal(r.body, &jr); err != nil {
		return nil, fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	listed := map[string]*jobInfo{}
	for i := range jr.Jobs {
		listed[jr.Jobs[i].id()] = &jr.Jobs[i]
	}
	for _, id := range ids {
		if j := listed[id]; j != nil {
			out[id] = j.status()
		}
	}
	return out, nil
}

// summaryStatus is a job's state as a batch query reports it: State, Raw
// and Reason as Status maps them, and the category of a final one.
func summaryStatus(id string, st []string, reason string) backends.Status {
	s := backends.Status{Raw: strings.Join(st, ",")}
	s.State, s.Reason = mapState(st, reason)
	if s.State.Final() {
		s.Category = category(st)
	}
	s.Message = fmt.Sprintf("Slurm job %s is %s", id, s.Raw)
	if reason != "" && reason != "None" {
		s.Message += " (" + reason + ")"
	}
	return s
}
