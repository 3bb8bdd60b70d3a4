package lsf

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// maxIDsPerQuery bounds the ids of one GET ws/jobs/{id,id,…}: 100 ids of at
// most 12 digits (plus an array index) keep the request line near 1.5 KB,
// far under the 8 KB a Tomcat connector (Application Center's server)
// accepts by default.
const maxIDsPerQuery = 100

// StatusMany reads the jobs with "Get detailed job information by job ID",
// GET ws/jobs/{id1},{id2},… (one request per maxIDsPerQuery ids), whose
// answer lists each job as the single-job read does, so each state is
// mapped by mapJob exactly as Status maps it. A job the answer does not
// list (unknown, or gone from mbatchd after CLEAN_PERIOD: reading its
// history is Status's work) or lists without a state mapJob knows is left
// out; so are ids that are not LSF job ids. A 404 means none is listed.
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	out := map[string]backends.Status{}
	want := uniqueIDs(ids)
	for len(want) > 0 {
		n := min(len(want), maxIDsPerQuery)
		if err := b.statusChunk(ctx, want[:n], out); err != nil {
			return nil, err
		}
		want = want[n:]
	}
	return out, nil
}

// uniqueIDs keeps the valid ids, each once, in their order.
func uniqueIDs(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if validID(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// statusChunk reads up to maxIDsPerQuery jobs with one request into out.
func (b *Backend) statusChunk(ctx context.Context, ids []string, out map[string]backends.Status) error {
	r := request{method: http.MethodGet, path: "/ws/jobs/" + strings.Join(ids, ","), accept: "application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return nil // "No jobs that match the specified criteria were found."
	}
	if err != nil {
		return transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return fmt.Errorf("GET /ws/jobs/{%d ids}: cannot read the answer: %w", len(ids), err)
	}
	wanted := map[string]bool{}
	for _, id := range ids {
		wanted[id] = true
	}
	entries := jobEntries(doc)
	for _, e := range entries {
		id := entryID(e)
		if id == "" && len(ids) == 1 && len(entries) == 1 {
			id = ids[0] // as jobInfo: the one job asked for
		}
		if !wanted[id] {
			continue
		}
		if st, err := mapJob(e); err == nil {
			out[id] = st
		}
	}
	return nil
}

var _ backends.StatusBatcher = (*Backend)(nil)

// StatusManyRequests implements backends.BatchCoster: one request per
// maxIDsPerQuery ids.
func (b *Backend) StatusManyRequests(n int) int { return backends.Chunks(n, maxIDsPerQuery) }
