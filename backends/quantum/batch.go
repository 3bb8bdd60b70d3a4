package quantum

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// GET /jobs cannot be filtered by id, so StatusMany reads only the newest
// jobs: at most listPages pages of listLimit for each of its two queries.
const (
	listLimit = 50
	listPages = 2
)

// StatusMany lists the instance's jobs, newest first, with GET /jobs (the
// query qiskit-ibm-runtime's jobs_get sends: limit, offset, pending,
// exclude_params; the answer {"jobs":[…],"count":N}), first the active
// ones (pending=true: Queued and Running), then, for the ids still
// missing, the ended ones (pending=false), so a job that has just ended is
// seen too. Each query reads at most listPages pages and stops early once
// every id is found or the list ends: one request when all asked jobs are
// active, at most 2×listPages. Each job's state is mapped as Status maps it
// (State, Raw, reason code and message; no times, which need the job's
// metrics). An id not among them (unknown, malformed, older than the pages
// read) or in a state Status does not know is left out.
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	want := map[string]bool{}
	for _, id := range ids {
		if validJobID(id) {
			want[id] = true
		}
	}
	out := map[string]backends.Status{}
	for _, pending := range []string{"true", "false"} {
		if len(want) == 0 {
			break
		}
		if err := b.listStates(ctx, pending, want, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listStates pages through GET /jobs?pending=<pending>, moving each wanted
// job it lists from want to out.
func (b *Backend) listStates(ctx context.Context, pending string, want map[string]bool, out map[string]backends.Status) error {
	offset := 0
	for page := 0; page < listPages && len(want) > 0; page++ {
		q := url.Values{"pending": {pending}, "limit": {strconv.Itoa(listLimit)}, "exclude_params": {"true"}}
		if offset > 0 {
			q.Set("offset", strconv.Itoa(offset))
		}
		buf, err := b.do(ctx, http.MethodGet, "/jobs", q, nil)
		if err != nil {
			return err
		}
		jobs, count, err := decodeJobList(buf)
		if err != nil {
			return fmt.Errorf("GET /jobs: cannot read the answer: %w", err)
		}
		for _, j := range jobs {
			if !want[j.ID] {
				continue
			}
			if st, err := j.status(); err == nil {
				out[j.ID] = st
				delete(want, j.ID)
			}
		}
		offset += len(jobs)
		if len(jobs) < listLimit || (count >= 0 && offset >= count) {
			return nil
		}
	}
	return nil
}

// decodeJobList reads GET /jobs' answer, {"jobs":[…],"count":N} (or a bare
// array); count is -1 when absent. A JSON error is not shown: its words may
// quote the body.
func decodeJobList(buf []byte) ([]jobResponse, int, error) {
	var list struct {
		Jobs  []jobResponse `json:"jobs"`
		Count *int          `json:"count"`
	}
	var err error
	if t := bytes.TrimSpace(buf); len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(t, &list.Jobs)
	} else {
		err = json.Unmarshal(buf, &list)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("not the documented job list (%s)", httpx.NotShown)
	}
	if list.Count == nil {
		return list.Jobs, -1, nil
	}
	return list.Jobs, *list.Count, nil
}

var _ backends.StatusBatcher = (*Backend)(nil)
