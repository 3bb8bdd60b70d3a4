package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Jobs past MinJobAge. slurmctld forgets a job MinJobAge seconds (300 by
// default) after it ended; from then on only slurmdbd knows it. A runner
// that re-attaches late (a pod rescheduled after a node failure, a cleanup
// run hours later) must not call such a job UNKNOWN when the cluster keeps
// accounting: getJob asks GET /slurmdb/vX/job/{id} before it says not found.
// A cluster without slurmdbd (or a slurmrestd without the openapi/slurmdbd
// plugin: a plain 404) keeps the old answer.

// getJob reads the job from slurmctld, or else from slurmdbd.
func (b *Backend) getJob(ctx context.Context, id string) (*jobInfo, error) {
	j, err := b.liveJob(ctx, id)
	if !errors.Is(err, backends.ErrNotFound) || !validID(id) {
		return j, err
	}
	aj, aerr := b.accountingJob(ctx, id)
	switch {
	case aj != nil:
		return aj, nil
	case errors.Is(aerr, backends.ErrTransient) || errors.Is(aerr, backends.ErrAuth) || errors.Is(aerr, context.Canceled):
		return nil, aerr
	}
	return nil, err
}

// dbJob is the part of slurmdbd's job record that status needs; the times
// and the comment are grouped there, unlike in slurmctld's record.
type dbJob struct {
	JobID    json.RawMessage `json:"job_id"`
	Name     string          `json:"name"`
	Comment  json.RawMessage `json:"comment"` // {"job": ...} (a string in old versions)
	User     string          `json:"user"`
	ExitCode json.RawMessage `json:"exit_code"`
	State    struct {
		Current json.RawMessage `json:"current"` // ["COMPLETED"] (v0.0.40+) or "COMPLETED"
		Reason  string          `json:"reason"`
	} `json:"state"`
	Time struct {
		Submission json.RawMessage `json:"submission"`
		Start      json.RawMessage `json:"start"`
		End        json.RawMessage `json:"end"`
		Elapsed    json.RawMessage `json:"elapsed"` // seconds
		Limit      json.RawMessage `json:"limit"`   // minutes
	} `json:"time"`
	Tres       dbTres   `json:"tres"`
	Steps      []dbStep `json:"steps"` // usage.go
	WorkingDir string   `json:"working_directory"`
	StdOut     string   `json:"stdout"`
	StdErr     string   `json:"stderr"`
	Partition  string   `json:"partition"`
	Account    string   `json:"account"`
	QOS        string   `json:"qos"`
	Array      struct {
		JobID  json.RawMessage `json:"job_id"`  // 0 for a job that is no array's
		TaskID json.RawMessage `json:"task_id"` // a number or {set,infinite,number}
	} `json:"array"`
}

// accountingJob asks slurmdbd for the job; nil without an error means it
// does not know it (or the cluster keeps no accounting).
func (b *Backend) accountingJob(ctx context.Context, id string) (*jobInfo, error) {
	jobs, err := b.accountingRecords(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, dj := range jobs {
		if j := dj.jobInfo(); j.id() == id {
			b.log.Info("slurmctld no longer knows the job; slurmdbd does", "job_id", id)
			return j, nil
		}
	}
	return nil, nil
}

// accountingRecords is GET /slurmdb/vX/job/{id}: the job's records, every
// task's for an array; none when slurmdbd does not know the job or the
// cluster keeps no accounting (then noAccounting is set).
func (b *Backend) accountingRecords(ctx context.Context, id string) ([]dbJob, error) {
	v, err := b.version(ctx)
	if err != nil {
		return nil, err
	}
	r, err := b.do(ctx, http.MethodGet, "/slurmdb/"+v.String()+"/job/"+id, nil)
	switch {
	case err != nil:
		return nil, err
	case r.status == http.StatusUnauthorized:
		return nil, b.authError(r)
	case r.status == http.StatusTooManyRequests || r.status == http.StatusBadGateway || r.status == http.StatusServiceUnavailable || r.status == http.StatusGatewayTimeout:
		return nil, backends.Transient(errors.New(r.String()))
	case r.status == http.StatusNotFound && !r.json:
		b.noAccounting.Store(true) // slurmrestd's plain 404: no openapi/slurmdbd plugin
		return nil, nil
	case r.status != http.StatusOK || !r.json:
		b.log.Debug("slurmdbd does not know the job", "job_id", id, "answer", r.String())
		return nil, nil
	}
	var resp struct {
		Jobs []dbJob `json:"jobs"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		return nil, fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	return resp.Jobs, nil
}

// jobInfo puts slurmdbd's record into slurmctld's shape.
func (d dbJob) jobInfo() *jobInfo {
	j := &jobInfo{JobID: d.JobID, Name: d.Name, UserName: d.User, JobState: d.State.Current,
		StateReason: d.State.Reason, ExitCode: d.ExitCode, SubmitTime: d.Time.Submission,
		StartTime: d.Time.Start, EndTime: d.Time.End, StandardOutput: d.StdOut, StandardError: d.StdErr,
		WorkingDir: d.WorkingDir, Partition: d.Partition, Account: d.Account, QOS: d.QOS,
		ArrayJobID: d.Array.JobID, ArrayTaskID: d.Array.TaskID}
	var c struct {
		Job string `json:"job"`
	}
	if json.Unmarshal(d.Comment, &c) == nil {
		j.Comment = c.Job
	} else {
		_ = json.Unmarshal(d.Comment, &j.Comment)
	}
	return j
}
