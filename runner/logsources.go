package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// logSource picks where the job's output is read from, in this order:
//  1. a shared file system (LogDir) where the backend says the output goes;
//  2. the backend's own reader (local, Ray, LSF, Quantum, SSH tails; any
//     task of an array where the backend reads each task's, tasklogs_ssh.go);
//  3. the object a log shipper in the job writes (Slurm over REST with S3).
//
// It returns nil when the output is not followed or cannot be read. Each
// source is given the job's id as recorded (a chunked array's too) and
// picks the output it follows: an array's first task's, or LogTask's.
func (r *run) logSource(desc *record.Description, be backends.Backend) backends.LogReader {
	if r.LogOut == io.Discard {
		return nil
	}
	if r.LogDir != "" {
		if loc, ok := be.(backends.OutputLocator); ok {
			m, _ := ParseLogDir(r.LogDir) // checked by the command
			return &fileLogs{locate: loc, mount: m, paths: map[string]string{}, task: r.fileLogTask(be)}
		}
		r.Log.Warn("--log-dir is ignored: this backend does not say where a job's output goes", "backend", desc.Backend)
	}
	if tr, ok := be.(backends.TaskLogReader); ok && r.arr != nil {
		return r.taskLogSource(desc, r.arr.taskReader(tr))
	}
	if lr, ok := be.(backends.LogReader); ok {
		return firstChunk{lr}
	}
	if key, ok := r.shipKey(desc, be); ok {
		return &s3Logs{s3: r.s3, bucket: desc.UploadBucket, key: key}
	}
	return nil
}

// firstChunk reads a backend's own log of an array's first chunk (it holds
// the lowest index), or of the job.
type firstChunk struct{ backends.LogReader }

func (f firstChunk) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	return f.LogReader.ReadLogs(ctx, logID(id), offset, w)
}

// shipKey is the object a LogShipper's job ships its output to, when the job
// ships it: the backend cannot read output itself and the job has an upload
// bucket; a job that is no array ships only for the step's live log (no
// shared file system, the output followed). It is the same for every retry
// of one attempt, so a re-attach reads it on. An array's tasks ship their
// own outputs in any case: they are the only copy of them in S3 (an array
// has no stage-out); the key is the live task's (see tasklogs.go).
func (r *run) shipKey(desc *record.Description, be backends.Backend) (string, bool) {
	_, ships := be.(backends.LogShipper)
	_, reads := be.(backends.LogReader)
	if !ships || reads || r.s3 == nil || desc.UploadBucket == "" {
		return "", false
	}
	if r.arr != nil {
		return r.taskLogPrefix() + strconv.Itoa(r.liveTask()) + ".log", true
	}
	if r.LogOut == io.Discard || r.LogDir != "" {
		return "", false
	}
	// Each attempt's job ships to an object of its own: a new attempt must
	// not be read from where the failed one left off.
	return RunPrefix(r.JobName, AttemptKey(r.rec.UID, attemptOf(r.rec.Data)), "") + "job.live.log", true
}

// A log shipper's URL must outlive the job's wait in the queue and its run,
// and no more: whoever reads it off the node can overwrite the log until
// it expires. It lives the job's time limit plus shipQueueAllowance when
// the backend knows the limit, else shipURLDefault; never past a week, the
// longest S3 signatures allow. A job that outlives its URL's life stops
// shipping (the step's log stops); its whole output is still uploaded at
// its end, by a stage-out job with URLs of its own.
const (
	shipQueueAllowance = time.Hour
	shipURLDefault     = 24 * time.Hour
	shipURLMax         = 7 * 24 * time.Hour
)

// shipURLLife is how long the URL of job's log shipper lives.
func shipURLLife(be backends.Backend, job backends.Job) time.Duration {
	if tl, ok := be.(backends.TimeLimiter); ok {
		if limit, ok := tl.TimeLimit(job); ok {
			return min(limit+shipQueueAllowance, shipURLMax)
		}
	}
	return shipURLDefault
}

// minShipEvery: a shipper PUTs the whole output file each time it grew, so
// it does not run more often than this.
const minShipEvery = 5 * time.Second

// logShip presigns the URL a LogShipper's job ships its output to, when it
// will (see shipKey).
func (r *run) logShip(ctx context.Context, desc *record.Description, be backends.Backend, job backends.Job) (*backends.LogShip, error) {
	key, ok := r.shipKey(desc, be)
	if !ok {
		return nil, nil
	}
	life := shipURLLife(be, job)
	if r.arr != nil {
		return r.taskShip(ctx, desc, life)
	}
	u, err := r.s3.PresignPut(ctx, desc.UploadBucket, key, life)
	if err != nil {
		return nil, err
	}
	r.Secrets.Add(presignSecret(u))
	r.Log.Info("the job ships its output to a presigned URL", "valid_for", life.String())
	return &backends.LogShip{URL: u, Every: max(r.LogInterval, minShipEvery)}, nil
}

// s3Logs reads the object a log shipper writes with ranged GETs from the
// offset on: each read transfers only what is new.
type s3Logs struct {
	s3     *S3Store
	bucket string
	key    string
}

func (l *s3Logs) ReadLogs(ctx context.Context, _ string, offset int64, w io.Writer) (int64, error) {
	opts := minio.GetObjectOptions{}
	if offset > 0 {
		if err := opts.SetRange(offset, 0); err != nil {
			return offset, err
		}
	}
	obj, err := l.s3.client.GetObject(ctx, l.bucket, l.key, opts)
	if err != nil {
		return offset, l.s3.scrubErr(err)
	}
	defer obj.Close()
	n, err := io.Copy(w, obj)
	if err != nil {
		switch minio.ToErrorResponse(err).Code {
		case "NoSuchKey", "InvalidRange": // not shipped yet, or nothing new
			return offset + n, nil
		}
		return offset + n, l.s3.scrubErr(err)
	}
	return offset + n, nil
}

// logMount maps the remote system's path of a job's output to the pod: a
// file under Remote appears under Pod. With no Remote, the file appears in
// Pod by its base name.
type logMount struct{ Remote, Pod string }

// ParseLogDir parses --log-dir: POD_DIR (the job's output file appears there
// by its base name) or REMOTE_DIR:POD_DIR (the remote directory is mounted
// there, like a volume), both absolute.
func ParseLogDir(v string) (logMount, error) {
	remote, pod, mapped := strings.Cut(v, ":")
	if !mapped {
		remote, pod = "", v
	}
	if !path.IsAbs(pod) || (mapped && !path.IsAbs(remote)) {
		return logMount{}, backends.Invalid("log-dir", "is %q; give the pod's directory where the job's output appears (/logs), or the remote directory and where it is mounted in the pod (/home:/mnt/home), as absolute paths", v)
	}
	if mapped {
		remote = path.Clean(remote)
	}
	return logMount{Remote: remote, Pod: filepath.Clean(pod)}, nil
}

// podPath is where the remote file p appears in the pod.
func (m logMount) podPath(p string) (string, error) {
	p = path.Clean(p)
	if m.Remote == "" {
		return filepath.Join(m.Pod, path.Base(p)), nil
	}
	if !strings.HasPrefix(p, strings.TrimSuffix(m.Remote, "/")+"/") {
		return "", fmt.Errorf("the job's output %s is not under %s (--log-dir %s:%s)", p, m.Remote, m.Remote, m.Pod)
	}
	rel := strings.TrimPrefix(p, m.Remote)
	return filepath.Join(m.Pod, filepath.FromSlash(rel)), nil
}

// remotePath is where the followed output of job id is on the cluster:
// task's, in the chunk that runs it, or the first task's (of the first
// chunk) or the job's.
func (l *fileLogs) remotePath(ctx context.Context, id string) (string, error) {
	tl, ok := l.locate.(backends.TaskOutputLocator)
	if l.task == nil || !ok {
		return l.locate.OutputPath(ctx, logID(id))
	}
	c := taskChunk(id, *l.task)
	return tl.TaskOutputPath(ctx, c.id, *l.task-c.offset)
}

// fileLogs reads the job's output file where a shared file system makes it
// visible in the pod.
type fileLogs struct {
	locate backends.OutputLocator
	mount  logMount
	paths  map[string]string // job id -> the file in the pod
	task   *int              // the array's task followed (LogTask); nil: the first
}

func (l *fileLogs) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	p, ok := l.paths[id]
	if !ok {
		remote, err := l.remotePath(ctx, id)
		if err != nil {
			return offset, err
		}
		if p, err = l.mount.podPath(remote); err != nil {
			return offset, err
		}
		l.paths[id] = p
	}
	// Non-blocking: a job's output named as a FIFO must not block the
	// open (and with it the follow loop) until someone writes to it.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return offset, nil // not written yet (or not visible yet on this client)
	}
	if err != nil {
		return offset, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		return offset, &record.LocalFileError{Path: p, Problem: "is " + record.FileKind(fi.Mode()) + ", not a regular file: the job's output is not read from it"}
	}
	if err != nil || fi.Size() <= offset {
		return offset, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	// Up to the size seen now: a read returns promptly even if the job
	// prints faster than we copy.
	n, err := io.Copy(w, io.LimitReader(f, fi.Size()-offset))
	return offset + n, err
}
