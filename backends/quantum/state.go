package quantum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// jobResponse holds the fields of JobResponse that matter.
type jobResponse struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Status  string `json:"status"`
	State   *struct {
		Status         string          `json:"status"`
		Reason         string          `json:"reason"`
		ReasonCode     json.RawMessage `json:"reason_code"`
		ReasonCodeOld  json.RawMessage `json:"reasonCode"`
		ReasonSolution string          `json:"reason_solution"`
	} `json:"state"`
	Created string   `json:"created"`
	Tags    []string `json:"tags"`
}

func rawScalar(r json.RawMessage) string {
	return strings.Trim(strings.TrimSpace(string(r)), `"`)
}

// ranTooLong is reason code 1305: the job hit its maximum execution time.
const ranTooLong = "1305"

func (j *jobResponse) status() (backends.Status, error) {
	raw := j.Status
	var st backends.Status
	if j.State != nil {
		if j.State.Status != "" {
			raw = j.State.Status
		}
		st.Reason = rawScalar(j.State.ReasonCode)
		if st.Reason == "" || st.Reason == "null" {
			st.Reason = rawScalar(j.State.ReasonCodeOld)
		}
		if st.Reason == "null" {
			st.Reason = ""
		}
		st.Message = j.State.Reason
		if s := strings.TrimSpace(j.State.ReasonSolution); s != "" {
			st.Message = strings.TrimSpace(st.Message + " (" + s + ")")
		}
	}
	st.Raw = raw
	if t, err := time.Parse(time.RFC3339Nano, j.Created); err == nil {
		st.SubmitTime = t.UTC()
	}
	return mapState(st)
}

// mapState sets st.State from st.Raw: IBM Quantum's job status.
func mapState(st backends.Status) (backends.Status, error) {
	raw := st.Raw
	l := strings.ToLower(strings.TrimSpace(raw))
	switch {
	case l == "queued" || l == "initializing" || l == "validating":
		st.State = backends.Pending
	case l == "running":
		st.State = backends.Running
	case l == "completed":
		st.State = backends.Done
	case l == "failed" || l == "error":
		st.State = backends.Failed
	case strings.HasPrefix(l, "cancelled") || strings.HasPrefix(l, "canceled"):
		if st.Reason == ranTooLong || strings.Contains(l, "ran too long") || strings.Contains(strings.ToLower(st.Message), "ran too long") {
			st.State, st.Category = backends.Failed, backends.CategoryTimeout
			if st.Reason == "" {
				st.Reason = ranTooLong
			}
			if st.Message == "" {
				st.Message = "ran too long: the maximum execution time was reached"
			}
		} else {
			st.State = backends.Killed
		}
	case l == "":
		return st, errors.New("IBM Quantum answered a job without a status")
	default:
		return st, fmt.Errorf("unknown IBM Quantum job status %q", raw)
	}
	return st, nil
}

// Status reads the job.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	if !validJobID(id) {
		return backends.Status{}, fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	buf, err := b.do(ctx, http.MethodGet, "/jobs/"+id, url.Values{"exclude_params": {"true"}}, nil)
	if err != nil {
		return backends.Status{}, notFound(err)
	}
	var j jobResponse
	if err := json.Unmarshal(buf, &j); err != nil {
		return backends.Status{}, fmt.Errorf("GET /jobs/%s: cannot read the answer: %w", id, err)
	}
	st, err := j.status()
	if err != nil {
		return st, fmt.Errorf("GET /jobs/%s: %w", id, err)
	}
	if st.State.Final() {
		b.times(ctx, id, &st)
	}
	if note := b.versionNote(); note != "" {
		// A pinned version near or past its sunset is said where the user
		// looks (status.message), not only in the pod's log.
		if st.Message == "" {
			st.Message = "IBM Quantum job " + id + " is " + st.Raw
		}
		st.Message += "; note: " + note
	}
	return st, nil
}

// times fills start and end from the job's metrics (best effort).
func (b *Backend) times(ctx context.Context, id string, st *backends.Status) {
	buf, err := b.do(ctx, http.MethodGet, "/jobs/"+id+"/metrics", nil, nil)
	if err != nil {
		b.log.Debug("no metrics for the job's times", "job_id", id, "err", err)
		return
	}
	var m struct {
		Timestamps struct {
			Created, Running, Finished string
		} `json:"timestamps"`
	}
	if json.Unmarshal(buf, &m) != nil {
		return
	}
	parse := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t.UTC()
	}
	st.StartTime, st.EndTime = parse(m.Timestamps.Running), parse(m.Timestamps.Finished)
	if st.SubmitTime.IsZero() {
		st.SubmitTime = parse(m.Timestamps.Created)
	}
}
