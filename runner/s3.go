package runner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// DefaultS3PartSize is the multipart part size of S3Store.Upload.
//
// When the size of an upload is unknown (a stream from the remote system),
// minio-go holds exactly one part in memory at a time, so the part size is
// the upload's memory bound. Left to itself, minio-go sizes parts for the
// largest possible object (5 TiB / 10,000 parts = 512 MiB), which would need
// a 512 MiB buffer in a pod that is usually given far less. 16 MiB keeps the
// buffer small while still allowing 10,000 × 16 MiB ≈ 156 GiB per object
// (S3's part limit); set S3Config.PartSize for bigger outputs.
const DefaultS3PartSize = 16 << 20

// S3 credentials keys, first the documented one, then common aliases (the
// names used by IBM's samples, the AWS CLI, and MinIO's console). The
// Credentials implementation trims the values.
var (
	s3AccessKeyNames = []string{"accesskey", "access_key", "AWS_ACCESS_KEY_ID", "accessKey"}
	s3SecretKeyNames = []string{"secretkey", "secret_key", "AWS_SECRET_ACCESS_KEY", "secretKey"}
)

// S3Config says how to reach an S3 endpoint.
type S3Config struct {
	// Endpoint is host:port, without a scheme (s3.endpoint).
	Endpoint string
	// Secure selects HTTPS (s3.secure).
	Secure bool
	// Region is optional; when empty, the client asks the server for each
	// bucket's region.
	Region string
	// Credentials is the mounted S3 Secret; read once, by NewS3Store.
	Credentials backends.Credentials
	// CAFile adds a PEM CA bundle to the system roots; Insecure turns TLS
	// verification off (only on the user's request).
	CAFile   string
	Insecure bool
	// PartSize is the multipart part size; 0 means DefaultS3PartSize.
	PartSize uint64
	// MaxRetries is the number of attempts per request of a read or an
	// upload (of each part); 0 means minio-go's default, 10.
	MaxRetries int
}

// S3Store reads job inputs from and writes job outputs to one S3 endpoint.
// Its errors wrap backends.ErrInvalid (naming the ConfigMap key to fix) or
// backends.ErrTransient (retrying may help); a context error, or a failure
// it cannot classify (such as the caller's reader failing during Upload), is
// returned with its chain intact. No error text contains the credentials.
type S3Store struct {
	client   *minio.Client
	probe    *minio.Client // the same endpoint, with few retries: see NewS3Store
	endpoint string
	partSize uint64
	secrets  []string // scrubbed from every error message
}

// S3Input is an object that the job reads, with the ConfigMap key that named
// it, so that an error can say which key to fix.
type S3Input struct {
	Field string // e.g. jobdata.jobScript
	Ref   record.ObjectRef
}

// NewS3Store connects to cfg.Endpoint. It reads the credentials once: build
// a new store (cheap, no network) to pick up a rotated Secret. It makes no
// request; Preflight checks that the endpoint and credentials work.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	ep := strings.TrimSpace(cfg.Endpoint)
	if err := record.CheckS3Endpoint(ep); err != nil {
		return nil, err
	}
	if dc, ok := cfg.Credentials.(DirCredentials); ok && dc.Flag == "" {
		dc.Flag = "--s3-credentials-dir" // name the flag that sets this directory
		cfg.Credentials = dc
	}
	if ep == "" {
		return nil, backends.Invalid("s3.endpoint", "is empty; set --s3-endpoint to host:port")
	}
	if strings.Contains(ep, "://") || strings.Contains(ep, "/") {
		return nil, backends.Invalid("s3.endpoint", "is %q; give host:port only (no scheme, no path) and choose TLS with s3.secure", ep)
	}
	if cfg.Credentials == nil {
		return nil, backends.Invalid("s3.secret", "no S3 credentials are mounted; mount the Secret named by s3.secret with keys accesskey and secretkey")
	}
	access, err := cfg.Credentials.Get(s3AccessKeyNames...)
	if err != nil {
		return nil, backends.Invalid("s3.secret", "no S3 access key: %v", err)
	}
	secret, err := cfg.Credentials.Get(s3SecretKeyNames...)
	if err != nil {
		return nil, backends.Invalid("s3.secret", "no S3 secret key: %v", err)
	}
	// The runner's TLS settings (CA bundle, verification) in httpx's
	// transport for object stores (no transparent gzip, a pool for parts).
	tlsConf, err := tlsConfig(cfg.CAFile, cfg.Insecure)
	if err != nil {
		return nil, err
	}
	tr := httpx.NewObjectTransport(httpx.Options{TLS: tlsConf})
	opts := func(retries int) *minio.Options {
		return &minio.Options{
			Creds:      credentials.NewStaticV4(access, secret, ""),
			Secure:     cfg.Secure,
			Region:     cfg.Region,
			Transport:  tr,
			MaxRetries: retries,
		}
	}
	// Data calls keep minio-go's default retries (10, backoff capped at 1 s):
	// a part that fails is re-sent from its buffer, which the caller could
	// not do for a stream. Preflight uses 2, so that an endpoint that is
	// down or misspelled fails in well under a second instead of ~5 s.
	client, err := minio.New(ep, opts(cfg.MaxRetries))
	if err != nil {
		return nil, backends.Invalid("s3.endpoint", "is %q: %v; give host:port", ep, err)
	}
	probeRetries := 2
	if cfg.MaxRetries == 1 {
		probeRetries = 1
	}
	probe, err := minio.New(ep, opts(probeRetries))
	if err != nil {
		return nil, backends.Invalid("s3.endpoint", "is %q: %v; give host:port", ep, err)
	}
	ps := cfg.PartSize
	if ps == 0 {
		ps = DefaultS3PartSize
	}
	return &S3Store{client: client, probe: probe, endpoint: ep, partSize: ps, secrets: []string{secret, access}}, nil
}

// preflightTimeout bounds the whole preflight: a black-holed endpoint (no
// answer at all) must not hold the step for minutes before exit 2.
const preflightTimeout = 60 * time.Second

// Preflight checks, before anything is submitted, that the endpoint answers,
// that it accepts the credentials, that every input exists, and that
// uploadBucket exists (created when createBucket is set; "" skips the
// check). The first problem is returned as an error wrapping
// backends.ErrInvalid that names the key to fix (s3.endpoint, s3.secure,
// s3.secret, the input's field, s3upload.bucket); a server that is
// reachable but failing (5xx, SlowDown) gives a backends.ErrTransient.
func (s *S3Store) Preflight(ctx context.Context, inputs []S3Input, uploadBucket string, createBucket bool) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	// ListBuckets first: it is the one call that tells "unreachable" from
	// "wrong credentials" cleanly. HEAD requests (stat, bucket exists) have
	// no error body, so a bad signature there looks like any 403.
	if _, err := s.probe.ListBuckets(ctx); err != nil {
		var er minio.ErrorResponse
		switch {
		case errors.As(err, &er) && er.Code == "AccessDenied":
			// The signature was accepted; the key may just not list buckets
			// (a key scoped to some buckets). The checks below still apply.
		case errors.As(err, &er) && authCode(er.Code):
			return backends.Invalid("s3.secret", "the S3 endpoint %s refused the credentials (%s); check accesskey and secretkey in the Secret named by s3.secret", s.endpoint, er.Code)
		default:
			return s.reachError(ctx, err)
		}
	}
	for _, in := range inputs {
		// minio-go reports some bad names as plain errors, and a name S3
		// cannot hold is the user's to fix: check them here.
		if err := s3utils.CheckValidBucketName(in.Ref.Bucket); err != nil {
			return backends.Invalid(in.Field, "%s: bad bucket name (%v); fix the bucket:object name", in.Ref, err)
		}
		if err := s3utils.CheckValidObjectName(in.Ref.Object); err != nil {
			return backends.Invalid(in.Field, "%s: bad object name (%v); fix the bucket:object name", in.Ref, err)
		}
		if _, err := s.probe.StatObject(ctx, in.Ref.Bucket, in.Ref.Object, minio.StatObjectOptions{}); err != nil {
			return s.classify(err, in.Field, "checking "+in.Ref.String())
		}
	}
	if uploadBucket == "" {
		return nil
	}
	if err := s3utils.CheckValidBucketName(uploadBucket); err != nil {
		return backends.Invalid("s3upload.bucket", "%q is not a valid bucket name (%v); fix it", uploadBucket, err)
	}
	ok, err := s.probe.BucketExists(ctx, uploadBucket)
	if err != nil {
		return s.classify(err, "s3upload.bucket", "checking bucket "+uploadBucket)
	}
	if ok {
		return nil
	}
	if !createBucket {
		return backends.Invalid("s3upload.bucket", "bucket %q does not exist at %s; create it, name an existing bucket, or set s3upload.createBucket: \"true\" (--s3-create-bucket) for invoke to create it", uploadBucket, s.endpoint)
	}
	err = s.probe.MakeBucket(ctx, uploadBucket, minio.MakeBucketOptions{})
	var er minio.ErrorResponse
	if err != nil && errors.As(err, &er) && er.Code == "BucketAlreadyOwnedByYou" {
		return nil // created meanwhile by a concurrent step
	}
	if err != nil {
		return s.classify(err, "s3upload.bucket", "creating bucket "+uploadBucket)
	}
	return nil
}

// reachError explains why the first request failed: an ErrInvalid naming
// the key to fix, or ErrTransient when the server answered but is failing.
func (s *S3Store) reachError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err() // cancelled by the caller: not the endpoint's fault
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.Code != "" {
		if transientResponse(er) {
			return backends.Transient(s.scrubErr(fmt.Errorf("S3 endpoint %s: %w", s.endpoint, err)))
		}
		return backends.Invalid("s3.endpoint", "%s does not answer like an S3 server (%s); check s3.endpoint", s.endpoint, s.scrub(er.Error()))
	}
	msg := s.scrub(err.Error())
	var ua x509.UnknownAuthorityError
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return backends.Invalid("s3.secure", "is true but %s speaks plain HTTP; set s3.secure=false (or use the endpoint's HTTPS port)", s.endpoint)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return backends.Invalid("s3.secure", "is true but %s does not speak TLS; set s3.secure=false (or use the endpoint's HTTPS port)", s.endpoint)
	case errors.As(err, &ua) || strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return backends.Invalid("s3.endpoint", "TLS with %s failed (%s); give its CA with --ca-file (or --insecure-skip-tls-verify)", s.endpoint, msg)
	case record.Unreachable(err):
		// Refused, reset, timed out: an S3 server that is down or
		// restarting now may answer the retry (which re-attaches).
		return backends.Transient(fmt.Errorf("s3.endpoint: cannot reach %s (%s); a retry of the step tries again; if it persists, "+
			"check s3.endpoint (host:port), s3.secure, and that the endpoint is reachable from here", s.endpoint, msg))
	}
	return backends.Invalid("s3.endpoint", "cannot reach %s (%s); check s3.endpoint (host:port), s3.secure, and that the endpoint is reachable from here", s.endpoint, msg)
}

// ReadSmall returns the whole object (a script, parameters, metadata),
// refusing one larger than max bytes: such files are inlined into the job
// submission, which neither the pod's memory nor the remote API is sized for.
func (s *S3Store) ReadSmall(ctx context.Context, ref record.ObjectRef, field string, max int64) ([]byte, error) {
	rc, size, err := s.Open(ctx, ref, field)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > max {
		return nil, backends.Invalid(field, "object %s is %d bytes, more than the %d allowed here; shrink it, or pass it as jobdata.additionalData", ref, size, max)
	}
	// The object may have been replaced since the stat: read at most max+1.
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, s.classify(err, field, "reading "+ref.String())
	}
	if int64(len(b)) > max {
		return nil, backends.Invalid(field, "object %s is more than the %d bytes allowed here; shrink it, or pass it as jobdata.additionalData", ref, max)
	}
	return b, nil
}

// Open streams an object; size is its length in bytes. field is the
// ConfigMap key that named it, blamed if it does not exist.
func (s *S3Store) Open(ctx context.Context, ref record.ObjectRef, field string) (io.ReadCloser, int64, error) {
	obj, err := s.client.GetObject(ctx, ref.Bucket, ref.Object, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.classify(err, field, "opening "+ref.String())
	}
	// GetObject is lazy; Stat sends the request, so a missing object fails
	// here rather than at the first Read.
	info, err := obj.Stat()
	if err != nil {
		_ = obj.Close()
		return nil, 0, s.classify(err, field, "opening "+ref.String())
	}
	return obj, info.Size, nil
}

// Upload streams r to bucket/key and returns its location, s3://bucket/key.
// size is r's length, or -1 when unknown; either way at most one part
// (S3Config.PartSize) is held in memory. An object at key is replaced, so
// keys must be unique per run: see RunPrefix. Transient failures wrap
// backends.ErrTransient; a failed upload leaves no object and no parts
// behind (minio-go aborts the multipart upload).
func (s *S3Store) Upload(ctx context.Context, bucket, key string, r io.Reader, size int64) (string, error) {
	_, err := s.client.PutObject(ctx, bucket, key, r, size, minio.PutObjectOptions{
		PartSize:    s.partSize,
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return "", s.classify(err, "s3upload.bucket", "uploading s3://"+bucket+"/"+key)
	}
	return "s3://" + bucket + "/" + key, nil
}

// PresignPut returns a URL that lets its holder PUT bucket/key, and nothing
// else, until expiry: what a stage-out job on a remote system gets instead
// of the S3 keys.
func (s *S3Store) PresignPut(ctx context.Context, bucket, key string, expiry time.Duration) (string, error) {
	u, err := s.client.PresignedPutObject(ctx, bucket, key, expiry)
	if err != nil {
		return "", s.classify(err, "s3upload.bucket", "presigning s3://"+bucket+"/"+key)
	}
	return u.String(), nil
}

// Keys lists the keys under prefix in bucket.
func (s *S3Store) Keys(ctx context.Context, bucket, prefix string) (map[string]bool, error) {
	keys := map[string]bool{}
	for o := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.classify(o.Err, "s3upload.bucket", "listing s3://"+bucket+"/"+prefix)
		}
		keys[o.Key] = true
	}
	return keys, nil
}

// PresignPostPrefix returns a presigned POST form (the URL to send it to
// and its fields) that lets its holder write any key under prefix in
// bucket, and nothing else, until expiry: what an array's tasks ship their
// outputs with, each to an object of its own, with one form for them all.
func (s *S3Store) PresignPostPrefix(ctx context.Context, bucket, prefix string, expiry time.Duration) (string, map[string]string, error) {
	p := minio.NewPostPolicy()
	err := errors.Join(p.SetBucket(bucket), p.SetKeyStartsWith(prefix), p.SetExpires(time.Now().Add(expiry)))
	if err != nil {
		return "", nil, err
	}
	u, fields, err := s.client.PresignedPostPolicy(ctx, p)
	if err != nil {
		return "", nil, s.classify(err, "s3upload.bucket", "presigning a form for s3://"+bucket+"/"+prefix)
	}
	delete(fields, "key") // each task names its own
	return u.String(), fields, nil
}

// presignSecret is what makes a presigned URL usable, its signature: that
// is what gets registered for scrubbing. The rest grants nothing (the access
// key id in it is a secret of its own), and a whole URL of hundreds of
// characters would cost the scrubber's patterns some 15 MiB.
func presignSecret(u string) string {
	if p, err := url.Parse(u); err == nil {
		if sig := p.Query().Get("X-Amz-Signature"); sig != "" {
			return sig
		}
	}
	return u
}

// Exists reports whether bucket/key exists, and its location.
func (s *S3Store) Exists(ctx context.Context, bucket, key string) (string, bool, error) {
	_, err := s.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err == nil {
		return "s3://" + bucket + "/" + key, true, nil
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" || minio.ToErrorResponse(err).StatusCode == 404 {
		return "", false, nil
	}
	return "", false, s.classify(err, "s3upload.bucket", "checking s3://"+bucket+"/"+key)
}

var unsafeKeyChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// OutputPrefix is the key prefix of a run's outputs in the layout asked
// for: RunPrefix, or for IBM's layout the job's name alone, which readers
// written for IBM's Bridge Operator expect (and where another run of the
// same job name overwrites them).
func OutputPrefix(layout, job, key, runID string) string {
	if layout == record.LayoutIBM {
		return cleanKeyPart(job) + "/"
	}
	return RunPrefix(job, key, runID)
}

func cleanKeyPart(s string) string {
	s = strings.Trim(unsafeKeyChars().ReplaceAllString(s, "_"), ".")
	if s == "" {
		s = "_"
	}
	return s
}

// RunPrefix is the key prefix for one run's outputs: "<job>/<key>/", or
// "<job>/<key>/<runID>/" when the remote job id is known.
//
// The idempotency key is derived from the ConfigMap's UID, so it differs for
// every run, even of a job name that is reused (a recreated ConfigMap is a
// new run), and it is the same for every retry of one run: a retried invoke
// replaces its own partial uploads and never touches another run's. The job
// name comes first so that a person browsing the bucket finds a job's runs
// together; the remote id (optional) lets them match a run with the remote
// system's records. Each part is reduced to [A-Za-z0-9._-].
func RunPrefix(job, key, runID string) string {
	p := cleanKeyPart(job) + "/" + cleanKeyPart(key) + "/"
	if runID != "" {
		p += cleanKeyPart(runID) + "/"
	}
	return p
}

// S3Inputs lists the objects a job description d reads from S3, each with its ConfigMap key,
// in the order Preflight should check them.
func S3Inputs(d *record.Description) ([]S3Input, error) {
	var out []S3Input
	add := func(field, v string) error {
		ref, err := record.ParseObjectRef(field, v)
		if err == nil {
			out = append(out, S3Input{Field: field, Ref: ref})
		}
		return err
	}
	if d.ScriptLocation == record.S3 {
		if err := add("jobdata.jobScript", d.Script); err != nil {
			return nil, err
		}
	}
	if d.ExtraLocation == record.S3 {
		for _, kv := range [][2]string{{"jobdata.scriptMetadata", d.Metadata}, {"jobdata.jobParameters", d.Parameters}} {
			if kv[1] == "" {
				continue
			}
			if err := add(kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	for _, ref := range d.AdditionalData {
		out = append(out, S3Input{Field: "jobdata.additionalData", Ref: ref})
	}
	return out, nil
}

// classify maps a minio-go error to the runner's kinds: missing object or
// bucket → ErrInvalid naming field; refused credentials → ErrInvalid naming
// s3.secret; network trouble, 5xx, SlowDown → ErrTransient; anything else
// (including the caller's reader failing during an upload) is returned with
// its chain intact.
func (s *S3Store) classify(err error, field, what string) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == "NoSuchKey" || er.Code == "NoSuchBucket" || er.Code == "NotFound":
			return backends.Invalid(field, "%s: it does not exist at %s (%s); create it, or fix the bucket:object name", what, s.endpoint, er.Code)
		case er.Code == "InvalidBucketName" || er.Code == "XMinioInvalidObjectName":
			return backends.Invalid(field, "%s: %s; fix the name", what, s.scrub(er.Error()))
		case er.Code == "AccessDenied":
			return backends.Invalid(field, "%s: access denied at %s; grant the credentials in s3.secret access to it, or fix the name", what, s.endpoint)
		case authCode(er.Code):
			return backends.Invalid("s3.secret", "%s: the S3 endpoint %s refused the credentials (%s); check accesskey and secretkey in the Secret named by s3.secret", what, s.endpoint, er.Code)
		case transientResponse(er):
			return backends.Transient(s.scrubErr(fmt.Errorf("%s at %s: %w", what, s.endpoint, err)))
		case er.StatusCode >= 400 && er.StatusCode < 500:
			// The server refused this request as it is (a key too long,
			// a name it cannot hold): the same request fails again.
			return backends.Invalid(field, "%s: the S3 endpoint %s refused it (HTTP %d%s); fix the bucket:object name", what, s.endpoint, er.StatusCode, s3Code(er.Code))
		}
		return s.scrubErr(fmt.Errorf("%s at %s: %w", what, s.endpoint, err))
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) {
		return backends.Transient(s.scrubErr(fmt.Errorf("%s at %s: %w", what, s.endpoint, err)))
	}
	return s.scrubErr(fmt.Errorf("%s at %s: %w", what, s.endpoint, err))
}

// s3Code is ", Code" for an S3 error code from the documented error shape
// (letters only); minio-go makes up "400 Bad Request" for a HEAD's empty body.
func s3Code(code string) string {
	for _, c := range code {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return ""
		}
	}
	if code == "" {
		return ""
	}
	return ", " + code
}

// authCode: S3 error codes that mean the key pair itself was refused.
// versitygw answers an unknown access key with XAdminUserNotFound (404).
func authCode(code string) bool {
	switch code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
		"InvalidSecurity", "AuthorizationHeaderMalformed", "AccountProblem", "XAdminUserNotFound":
		return true
	}
	return false
}

// transientResponse: the server is there but cannot serve now.
func transientResponse(er minio.ErrorResponse) bool {
	switch er.Code {
	case "SlowDown", "SlowDownRead", "SlowDownWrite", "ServiceUnavailable", "InternalError",
		"RequestTimeout", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
		return true
	}
	return er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests || er.StatusCode == http.StatusRequestTimeout
}

func (s *S3Store) scrub(msg string) string {
	for _, v := range s.secrets {
		if len(v) >= minSecretLen {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

// scrubErr keeps err's chain (for errors.Is/As) but scrubs its text.
func (s *S3Store) scrubErr(err error) error {
	return &scrubbedError{msg: s.scrub(err.Error()), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
