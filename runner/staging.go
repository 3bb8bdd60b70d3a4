package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// S3Access is how invoke reaches S3 for jobs that use it: the mounted
// credentials and TLS settings (the endpoint and bucket are in the job
// description).
type S3Access struct {
	CredentialsDir string
	CAFile         string
	Insecure       bool
}

// Limits on objects read whole into memory (scripts, metadata, parameters).
// Input files (additionalData) are streamed instead.
const maxSmallObject = 16 << 20

// preparer returns a function that resolves the job's inputs (script,
// metadata and parameters from S3, input files) and checks it, once. It is
// called before the intent is recorded on a fresh run, and only when a
// submit is really needed on a re-attach, so that a re-attach never depends
// on inputs that may since have been deleted.
func (r *run) preparer(ctx context.Context, desc *record.Description, be backends.Backend, base backends.Job) func() (backends.Job, error) {
	var (
		done bool
		job  backends.Job
		err  error
	)
	return func() (backends.Job, error) {
		if !done {
			job, err = r.prepare(ctx, desc, be, base)
			done = true
		}
		return job, err
	}
}

func (r *run) prepare(ctx context.Context, desc *record.Description, be backends.Backend, job backends.Job) (backends.Job, error) {
	if err := checkCapabilities(desc, be); err != nil {
		return job, err
	}
	if r.s3 != nil {
		inputs, err := S3Inputs(desc)
		if err != nil {
			return job, err
		}
		if err := r.s3.Preflight(ctx, inputs, desc.UploadBucket, desc.S3.CreateBucket); err != nil {
			return job, err
		}
	}
	job, err := r.resolveTexts(ctx, desc, job)
	if err != nil {
		return job, err
	}
	for _, ref := range desc.AdditionalData {
		job.Inputs = append(job.Inputs, backends.InputFile{
			Name: path.Base(ref.Object),
			Size: -1,
			Open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, _, err := r.s3.Open(ctx, ref, "jobdata.additionalData")
				return rc, err
			},
		})
	}
	if v, ok := be.(backends.Validator); ok {
		if err := v.Validate(job); err != nil {
			return job, err
		}
	}
	job.LogShip, err = r.logShip(ctx, desc, unwrapArray(be), job)
	return job, err
}

// checkCapabilities refuses a job that needs what the backend cannot do:
// input files it cannot stage, output files it cannot read.
func checkCapabilities(desc *record.Description, be backends.Backend) error {
	if desc.Array != nil {
		a, ok := be.(*arrayBackend)
		if !ok {
			return backends.Invalid("array", "the %s backend has no job arrays (slurm, htcondor and lsf have); remove array, or run one step per index (an Argo loop, a KFP ParallelFor)", desc.Backend)
		}
		if desc.Array.Chunk > 0 && a.limiter == nil {
			return backends.Invalid("array", "%q: /%d splits an array past a cluster's limit, which only Slurm has; the %s backend takes the whole array at once: drop /%d",
				desc.Array.String(), desc.Array.Chunk, desc.Backend, desc.Array.Chunk)
		}
		if len(desc.UploadFiles) > 0 {
			return backends.Invalid("s3upload.files", "is not uploaded from an array's tasks; have each task upload its own outputs (its index is in BRIDGE_TASK_INDEX), or remove array")
		}
	}
	if len(desc.AdditionalData) > 0 {
		if s, ok := be.(backends.InputStager); !ok || !s.StagesInputs() {
			return backends.Invalid("jobdata.additionalData", "the %s backend cannot make input files available to the job; remove additionalData and have the script fetch its inputs", desc.Backend)
		}
	}
	if len(desc.UploadFiles) > 0 {
		_, fetches := be.(backends.OutputFetcher)
		_, stages := be.(backends.StageOuter)
		if !fetches && !stages {
			return backends.Invalid("s3upload.files", "the %s backend cannot read files from the remote system; remove s3upload.files and have the script upload its outputs", desc.Backend)
		}
	}
	return nil
}

// resolveTexts fills the job's script, metadata and parameters, reading
// those given as S3 objects.
func (r *run) resolveTexts(ctx context.Context, desc *record.Description, job backends.Job) (backends.Job, error) {
	read := func(field, v string) (string, error) {
		ref, err := record.ParseObjectRef(field, v)
		if err != nil {
			return "", err
		}
		b, err := r.s3.ReadSmall(ctx, ref, field, maxSmallObject)
		return string(b), err
	}
	var err error
	switch desc.ScriptLocation {
	case record.Inline:
		job.Script = desc.Script
	case record.Remote:
		job.ScriptPath = desc.Script
	case record.S3:
		if job.Script, err = read("jobdata.jobScript", desc.Script); err != nil {
			return job, err
		}
	}
	meta, params := desc.Metadata, desc.Parameters
	if desc.ExtraLocation == record.S3 {
		if meta != "" {
			if meta, err = read("jobdata.scriptMetadata", meta); err != nil {
				return job, err
			}
		}
		if params != "" {
			if params, err = read("jobdata.jobParameters", params); err != nil {
				return job, err
			}
		}
	}
	job.Metadata, job.Parameters = []byte(meta), []byte(params)
	return job, nil
}

// uploadOutputs uploads, after the job reached a final state (any of them),
// the files named in s3upload.files and the job's log to the upload bucket
// under a prefix unique to this run. A file the job did not write is noted,
// not fatal; a failed upload is returned as a transient error, so that a
// retry (which re-attaches) can finish it.
func (r *run) uploadOutputs(ctx context.Context, desc *record.Description, be backends.Backend, id, key string) ([]string, []string, error) {
	prefix := OutputPrefix(desc.UploadLayout, r.JobName, key, id)
	if r.arr != nil {
		return r.uploadArrayLog(ctx, desc, be, id, prefix)
	}
	if so, ok := be.(backends.StageOuter); ok {
		if _, fetches := be.(backends.OutputFetcher); !fetches {
			return r.stageOut(ctx, desc, be, so, id, prefix)
		}
	}
	var locs, notes []string
	put := func(name string, fetch func(w io.Writer) error) error {
		// A transfer may outlast the budget: it bounds the failed attempts
		// and the waits between them, not a healthy upload (ctx is upload's).
		return retryTransient(ctx, min(r.RetryBudget, 2*time.Minute), func(context.Context) error {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(fetch(pw)) }()
			loc, err := r.s3.Upload(ctx, desc.UploadBucket, prefix+name, pr, -1)
			pr.Close()
			if err == nil {
				locs = append(locs, loc)
			}
			return err
		})
	}
	var failed []error
	if f, ok := be.(backends.OutputFetcher); ok {
		for _, file := range desc.UploadFiles {
			err := put(record.OutputName(file), func(w io.Writer) error { return f.FetchOutput(ctx, id, file, w) })
			switch {
			case errors.Is(err, backends.ErrNotFound):
				notes = append(notes, file+" was not found")
			case err != nil:
				failed = append(failed, fmt.Errorf("%s: %w", file, err))
			}
		}
	}
	if lr, ok := be.(backends.LogReader); ok {
		err := put(record.LogObject, func(w io.Writer) error { _, err := lr.ReadLogs(ctx, id, 0, w); return err })
		if err != nil && !errors.Is(err, backends.ErrNotFound) {
			failed = append(failed, fmt.Errorf("job log: %w", err))
		}
	}
	if len(failed) > 0 {
		// %v, not %w: the job was submitted, so even a "bad input" error of
		// S3 (the bucket was deleted meanwhile) must not read as exit 2.
		return locs, notes, backends.Transient(fmt.Errorf("uploading outputs to s3://%s/%s failed: %v", desc.UploadBucket, prefix, errors.Join(failed...)))
	}
	return locs, notes, nil
}

// stageOutURLExpiry bounds the presigned URLs a stage-out job gets, which
// are minted right before it is submitted: long enough for a small job
// (a 10-minute limit) to wait in a busy queue, short enough to be worth
// little if leaked.
const stageOutURLExpiry = time.Hour

// stageOut has the backend run a job of its own that uploads the outputs to
// presigned URLs, follows it, and then asks S3 which objects arrived.
func (r *run) stageOut(ctx context.Context, desc *record.Description, be backends.Backend, so backends.StageOuter, id, prefix string) ([]string, []string, error) {
	presign := func(name string) (string, error) {
		u, err := r.s3.PresignPut(ctx, desc.UploadBucket, prefix+name, stageOutURLExpiry)
		r.Secrets.Add(presignSecret(u))
		return u, err
	}
	fail := func(err error) ([]string, []string, error) {
		return nil, nil, backends.Transient(fmt.Errorf("staging outputs out to s3://%s/%s failed: %v", desc.UploadBucket, prefix, err))
	}
	var uploads []backends.Upload
	for _, file := range desc.UploadFiles {
		u, err := presign(record.OutputName(file))
		if err != nil {
			return fail(err)
		}
		uploads = append(uploads, backends.Upload{Path: file, URL: u})
	}
	logURL, err := presign(record.LogObject)
	if err != nil {
		return fail(err)
	}
	var sid string
	if err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) (err error) {
		sid, err = so.StageOut(ctx, id, uploads, logURL)
		return err
	}); err != nil {
		return fail(err)
	}
	r.Log.Info("stage-out job submitted", "job_id", id, "stage_out_id", sid)
	poll := &record.Backoff{Initial: r.MinPoll, Max: 5 * time.Second, Factor: 1.6, Jitter: 0.1}
	var st backends.Status
	for {
		st, err = be.Status(ctx, sid)
		if err == nil && st.State.Final() {
			break
		}
		if !record.SleepCtx(ctx, poll.Next()) {
			_ = be.Cancel(context.WithoutCancel(ctx), sid)
			return fail(fmt.Errorf("stage-out job %s did not end in time (last: %s %v)", sid, st.State, err))
		}
	}
	var locs, notes []string
	for _, file := range desc.UploadFiles {
		loc, ok, err := r.s3.Exists(ctx, desc.UploadBucket, prefix+record.OutputName(file))
		switch {
		case err != nil:
			return fail(err)
		case ok:
			locs = append(locs, loc)
		default:
			notes = append(notes, file+" was not found")
		}
	}
	if loc, ok, err := r.s3.Exists(ctx, desc.UploadBucket, prefix+record.LogObject); err == nil && ok {
		locs = append(locs, loc)
	}
	if st.State != backends.Done {
		return locs, notes, backends.Transient(fmt.Errorf("stage-out job %s ended %s (%s): some outputs may be missing", sid, st.State, st.Message))
	}
	return locs, notes, nil
}
