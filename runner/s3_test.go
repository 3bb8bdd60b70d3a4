package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// s3Store connects to the test server with the credentials directory that
// hack/s3-up.sh wrote (files with trailing newlines, as in a mounted Secret).
func s3Store(t *testing.T, mod ...func(*runner.S3Config)) *runner.S3Store {
	t.Helper()
	endpoint, _, _, credsDir := tests3.Env(t)
	cfg := runner.S3Config{
		Endpoint:    endpoint,
		Credentials: dirCreds(credsDir),
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := runner.NewS3Store(cfg)
	require.NoError(t, err)
	return s
}

// credsDir writes a Secret-like directory with the given files.
func credsDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600))
	}
	return dir
}

func withCreds(dir string) func(*runner.S3Config) {
	return func(c *runner.S3Config) { c.Credentials = dirCreds(dir) }
}

func dirCreds(dir string) runner.DirCredentials {
	return runner.DirCredentials{Dir: dir, Secrets: &runner.Secrets{}}
}

// requireField asserts that err is an ErrInvalid naming field, and that it
// does not contain the test server's keys.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, backends.ErrInvalid, "error: %v", err)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, field, fe.Field, "error: %v", err)
	noSecrets(t, err)
}

func noSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	_, ak, sk, _ := tests3.Env(t)
	assert.NotContains(t, err.Error(), sk, "the secret key leaked into an error")
	assert.NotContains(t, err.Error(), ak, "the access key leaked into an error")
}

func putObject(t *testing.T, bucket, key string, data []byte) record.ObjectRef {
	t.Helper()
	_, err := tests3.Client(t).PutObject(t.Context(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	require.NoError(t, err)
	return record.ObjectRef{Bucket: bucket, Object: key}
}

// closedPort returns 127.0.0.1:<port> where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestS3PreflightOK(t *testing.T) {
	s := s3Store(t)
	in, out := tests3.Bucket(t, "in"), tests3.Bucket(t, "out")
	inputs := []runner.S3Input{
		{Field: "jobdata.jobScript", Ref: putObject(t, in, "scripts/run.sh", []byte("#!/bin/sh\necho hi\n"))},
		{Field: "jobdata.jobParameters", Ref: putObject(t, in, "params.json", []byte(`{"n":1}`))},
		{Field: "jobdata.additionalData", Ref: putObject(t, in, "data/a.bin", []byte("abc"))},
	}
	require.NoError(t, s.Preflight(t.Context(), inputs, out, false))
	// Nothing to read and no upload bucket: still checks endpoint and keys.
	require.NoError(t, s.Preflight(t.Context(), nil, "", false))
}

func TestS3PreflightUnreachableEndpoint(t *testing.T) {
	_, _, _, dir := tests3.Env(t)
	s, err := runner.NewS3Store(runner.S3Config{Endpoint: closedPort(t), Credentials: dirCreds(dir)})
	require.NoError(t, err)
	start := time.Now()
	err = s.Preflight(t.Context(), nil, "bucket", false)
	// Refused is a fault of the moment (the server is down or restarting):
	// transient, so the step exits 75 and its retry tries again.
	require.ErrorIs(t, err, backends.ErrTransient)
	require.NotErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "s3.endpoint")
	assert.Less(t, time.Since(start), 5*time.Second, "an endpoint that refuses connections must fail fast")
	t.Logf("unreachable endpoint, after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestS3PreflightSecureAgainstPlainHTTP(t *testing.T) {
	s := s3Store(t, func(c *runner.S3Config) { c.Secure = true })
	err := s.Preflight(t.Context(), nil, "", false)
	requireField(t, err, "s3.secure")
	t.Logf("TLS against plain HTTP: %v", err)
}

func TestS3PreflightBadCredentials(t *testing.T) {
	_, ak, sk, _ := tests3.Env(t)
	cases := map[string]map[string]string{
		"wrong secret":     {"accesskey": ak, "secretkey": "wrong-" + sk[:10] + "-wrong-secret"},
		"wrong access key": {"accesskey": "NOSUCHKEY0123456789", "secretkey": sk},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			s := s3Store(t, withCreds(credsDir(t, files)))
			in := tests3.Bucket(t, "in")
			ref := putObject(t, in, "run.sh", []byte("x"))
			err := s.Preflight(t.Context(), []runner.S3Input{{Field: "jobdata.jobScript", Ref: ref}}, in, false)
			requireField(t, err, "s3.secret")
			assert.NotContains(t, err.Error(), files["secretkey"], "the secret key leaked into an error")
			t.Logf("%s: %v", name, err)

			// Reads and uploads with the bad keys must not leak them either.
			_, err = s.ReadSmall(t.Context(), ref, "jobdata.jobScript", 100)
			requireField(t, err, "s3.secret")
			assert.NotContains(t, err.Error(), files["secretkey"])
			_, err = s.Upload(t.Context(), in, "k", strings.NewReader("x"), 1)
			require.Error(t, err)
			noSecrets(t, err)
			assert.NotContains(t, err.Error(), files["secretkey"])
		})
	}
}

func TestS3CredentialAliases(t *testing.T) {
	_, ak, sk, _ := tests3.Env(t)
	for _, names := range [][2]string{
		{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
		{"access_key", "secret_key"},
		{"accessKey", "secretKey"},
	} {
		s := s3Store(t, withCreds(credsDir(t, map[string]string{names[0]: ak, names[1]: sk})))
		require.NoError(t, s.Preflight(t.Context(), nil, "", false), "keys %v", names)
	}
	// A Secret without keys is an s3.secret error before any request.
	_, err := runner.NewS3Store(runner.S3Config{Endpoint: "127.0.0.1:1",
		Credentials: dirCreds(credsDir(t, map[string]string{"token": "abcd"}))})
	requireField(t, err, "s3.secret")
}

func TestS3PreflightMissingObject(t *testing.T) {
	s := s3Store(t)
	in := tests3.Bucket(t, "in")
	good := runner.S3Input{Field: "jobdata.jobScript", Ref: putObject(t, in, "run.sh", []byte("x"))}
	for _, field := range []string{"jobdata.jobScript", "jobdata.jobParameters", "jobdata.scriptMetadata", "jobdata.additionalData"} {
		for name, ref := range map[string]record.ObjectRef{
			"missing object":        {Bucket: in, Object: "nope/" + field},
			"missing bucket":        {Bucket: "bt-no-such-bucket-" + strconv.Itoa(rand.IntN(1e6)), Object: "x"},
			"invalid bucket name":   {Bucket: "Not_A..Bucket", Object: "x"},
			"object in good bucket": {Bucket: in, Object: "run.sh.missing"},
		} {
			err := s.Preflight(t.Context(), []runner.S3Input{good, {Field: field, Ref: ref}}, "", false)
			requireField(t, err, field)
			if field == "jobdata.additionalData" {
				t.Logf("%s: %v", name, err)
			}
		}
	}
}

func TestS3PreflightUploadBucket(t *testing.T) {
	s := s3Store(t)
	c := tests3.Client(t)
	name := "bt-create-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { _ = tests3.RemoveBucket(context.Background(), c, name) })

	err := s.Preflight(t.Context(), nil, name, false)
	requireField(t, err, "s3upload.bucket")
	t.Logf("missing bucket: %v", err)
	ok, err := c.BucketExists(t.Context(), name)
	require.NoError(t, err)
	require.False(t, ok, "Preflight created a bucket it was not asked to create")

	require.NoError(t, s.Preflight(t.Context(), nil, name, true))
	ok, err = c.BucketExists(t.Context(), name)
	require.NoError(t, err)
	require.True(t, ok, "Preflight did not create the bucket")
	// Idempotent: an existing bucket with createBucket is fine.
	require.NoError(t, s.Preflight(t.Context(), nil, name, true))

	requireField(t, s.Preflight(t.Context(), nil, "Bad_Bucket!", true), "s3upload.bucket")
}

func TestS3ReadSmall(t *testing.T) {
	s := s3Store(t)
	in := tests3.Bucket(t)
	script := []byte("#!/bin/bash\nsrun hostname\n")
	ref := putObject(t, in, "run.sh", script)

	got, err := s.ReadSmall(t.Context(), ref, "jobdata.jobScript", 1024)
	require.NoError(t, err)
	assert.Equal(t, script, got)

	got, err = s.ReadSmall(t.Context(), ref, "jobdata.jobScript", int64(len(script)))
	require.NoError(t, err, "an object of exactly max bytes is allowed")
	assert.Equal(t, script, got)

	_, err = s.ReadSmall(t.Context(), ref, "jobdata.jobScript", int64(len(script))-1)
	requireField(t, err, "jobdata.jobScript")
	assert.Contains(t, err.Error(), "bytes")
	t.Logf("too large: %v", err)

	_, err = s.ReadSmall(t.Context(), record.ObjectRef{Bucket: in, Object: "missing"}, "jobdata.jobParameters", 1024)
	requireField(t, err, "jobdata.jobParameters")

	empty := putObject(t, in, "empty.json", nil)
	got, err = s.ReadSmall(t.Context(), empty, "jobdata.jobParameters", 1024)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestS3OpenAndUploadSmall(t *testing.T) {
	s := s3Store(t)
	b := tests3.Bucket(t)
	data := bytes.Repeat([]byte("bridge-runner "), 1000)

	loc, err := s.Upload(t.Context(), b, "run-1/out.txt", bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	assert.Equal(t, "s3://"+b+"/run-1/out.txt", loc)

	rc, size, err := s.Open(t.Context(), record.ObjectRef{Bucket: b, Object: "run-1/out.txt"}, "jobdata.additionalData")
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, int64(len(data)), size)
	assert.Equal(t, data, got)

	// Unknown size, smaller than one part: still one object, same content.
	_, err = s.Upload(t.Context(), b, "run-1/unknown.txt", io.MultiReader(bytes.NewReader(data)), -1)
	require.NoError(t, err)
	got, err = s.ReadSmall(t.Context(), record.ObjectRef{Bucket: b, Object: "run-1/unknown.txt"}, "x", 1<<20)
	require.NoError(t, err)
	assert.Equal(t, data, got)

	_, _, err = s.Open(t.Context(), record.ObjectRef{Bucket: b, Object: "nope"}, "jobdata.additionalData")
	requireField(t, err, "jobdata.additionalData")

	_, err = s.Upload(t.Context(), "bt-no-such-bucket-for-upload", "k", bytes.NewReader(data), int64(len(data)))
	requireField(t, err, "s3upload.bucket")
	assert.NotErrorIs(t, err, backends.ErrTransient)
}

// TestS3UploadTransient: connection failures and an overloaded server are
// ErrTransient (the caller exits 75 and is retried), never ErrInvalid.
func TestS3UploadTransient(t *testing.T) {
	_, _, _, dir := tests3.Env(t)
	var calls atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>`+
			`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>1</RequestId></Error>`)
	}))
	defer slow.Close()
	for name, endpoint := range map[string]string{
		"SlowDown":           strings.TrimPrefix(slow.URL, "http://"),
		"connection refused": closedPort(t),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := runner.NewS3Store(runner.S3Config{Endpoint: endpoint, Region: "us-east-1", MaxRetries: 2,
				Credentials: dirCreds(dir)})
			require.NoError(t, err)
			_, err = s.Upload(t.Context(), "bucket", "key", strings.NewReader("data"), 4)
			require.ErrorIs(t, err, backends.ErrTransient, "error: %v", err)
			require.NotErrorIs(t, err, backends.ErrInvalid)
			noSecrets(t, err)
			_, err = s.Upload(t.Context(), "bucket", "key", io.MultiReader(strings.NewReader("data")), -1)
			require.ErrorIs(t, err, backends.ErrTransient, "error: %v", err)
			_, err = s.ReadSmall(t.Context(), record.ObjectRef{Bucket: "bucket", Object: "key"}, "jobdata.jobScript", 10)
			require.ErrorIs(t, err, backends.ErrTransient, "error: %v", err)
			t.Logf("%s: %v", name, err)
		})
	}
	// A server that is up but failing is not a configuration error at
	// preflight either: retrying later may succeed.
	s, err := runner.NewS3Store(runner.S3Config{Endpoint: strings.TrimPrefix(slow.URL, "http://"),
		Credentials: dirCreds(dir)})
	require.NoError(t, err)
	err = s.Preflight(t.Context(), nil, "bucket", false)
	require.ErrorIs(t, err, backends.ErrTransient, "error: %v", err)
	assert.Positive(t, calls.Load())
}

// genReader yields n pseudo-random bytes without ever holding them: the
// upload must stream, so the test must not hold 100 MiB either. It hides
// every interface but io.Reader, like a stream from a remote system.
type genReader struct {
	src  *rand.ChaCha8
	left int64
	sum  hash.Hash
}

func newGenReader(n int64) *genReader {
	return &genReader{src: rand.NewChaCha8([32]byte{'b', 'r'}), left: n, sum: sha256.New()}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, _ := g.src.Read(p)
	g.sum.Write(p[:n])
	g.left -= int64(n)
	return n, nil
}

// uploadResult is what the child process of TestS3UploadStream100MiB reports.
type uploadResult struct {
	Location    string  `json:"location"`
	Seconds     float64 `json:"seconds"`
	SHA256      string  `json:"sha256"`
	PeakHeapMiB float64 `json:"peak_heap_mib"` // sampled HeapAlloc, max during the upload
	BaseHeapMiB float64 `json:"base_heap_mib"` // HeapAlloc before the upload
	PeakSysMiB  float64 `json:"peak_sys_mib"`  // memory obtained from the OS by the Go runtime
	VmHWMMiB    float64 `json:"vmhwm_mib"`     // the process's peak resident set size
	Error       string  `json:"error,omitempty"`
}

const (
	streamSize     = 100 << 20
	envUploadChild = "BRIDGE_TEST_S3_UPLOAD_CHILD" // "bucket/key" for the child to upload to
)

// TestS3UploadStream100MiB uploads a generated 100 MiB stream of unknown
// size in a child process (so that its peak RSS is the upload's alone, not
// the whole test binary's), then checks the object: size, multipart ETag,
// and content, by streaming it back.
func TestS3UploadStream100MiB(t *testing.T) {
	s := s3Store(t)
	b := tests3.Bucket(t)
	key := runner.RunPrefix("stream-test", "br-0123456789abcdef", "") + "big.bin"

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestS3UploadChildProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envUploadChild+"="+b+"/"+key)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	var res uploadResult
	m := regexp.MustCompile(`(?m)^UPLOAD_RESULT (.*)$`).FindSubmatch(out)
	require.NotNil(t, m, "child printed no result: %s", out)
	require.NoError(t, json.Unmarshal(m[1], &res))
	require.Empty(t, res.Error)
	t.Logf("100 MiB stream (size unknown, part size %d MiB): %.2fs (%.0f MiB/s); peak heap %.1f MiB (%.1f MiB before), runtime Sys %.1f MiB, VmHWM %.1f MiB",
		runner.DefaultS3PartSize>>20, res.Seconds, 100/res.Seconds, res.PeakHeapMiB, res.BaseHeapMiB, res.PeakSysMiB, res.VmHWMMiB)
	assert.Equal(t, "s3://"+b+"/"+key, res.Location)
	// One part buffer (16 MiB) plus the runtime and the HTTP client; a
	// client that buffered the stream would need 100 MiB or more.
	assert.Less(t, res.PeakHeapMiB, 40.0, "peak heap")
	if raceEnabled() {
		t.Logf("race detector on: its shadow memory inflates RSS, so VmHWM is not checked")
	} else {
		assert.Less(t, res.VmHWMMiB, 64.0, "peak RSS")
	}

	info, err := tests3.Client(t).StatObject(t.Context(), b, key, minio.StatObjectOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(streamSize), info.Size)
	parts := (streamSize + runner.DefaultS3PartSize - 1) / runner.DefaultS3PartSize
	t.Logf("ETag %s", info.ETag)
	if strings.Contains(info.ETag, "-") {
		assert.True(t, strings.HasSuffix(info.ETag, "-"+strconv.Itoa(parts)), "ETag %q should end in -%d (one per part)", info.ETag, parts)
	} else {
		t.Errorf("ETag %q has no -N suffix: not a multipart upload?", info.ETag)
	}

	rc, size, err := s.Open(t.Context(), record.ObjectRef{Bucket: b, Object: key}, "jobdata.additionalData")
	require.NoError(t, err)
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, bufio.NewReader(rc))
	require.NoError(t, err)
	assert.Equal(t, int64(streamSize), n)
	assert.Equal(t, int64(streamSize), size)
	assert.Equal(t, res.SHA256, hex.EncodeToString(h.Sum(nil)), "content differs from what was uploaded")
}

// TestS3UploadChildProcess is the child of TestS3UploadStream100MiB; it
// does nothing when run on its own.
func TestS3UploadChildProcess(t *testing.T) {
	target := os.Getenv(envUploadChild)
	if target == "" {
		t.Skip("only run as the child of TestS3UploadStream100MiB")
	}
	bucket, key, _ := strings.Cut(target, "/")
	s := s3Store(t)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	res := uploadResult{BaseHeapMiB: mib(ms.HeapAlloc)}
	var peakHeap, peakSys atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sample the heap while the upload runs
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peakHeap.Load() {
				peakHeap.Store(ms.HeapAlloc)
			}
			if ms.Sys > peakSys.Load() {
				peakSys.Store(ms.Sys)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()

	gen := newGenReader(streamSize)
	start := time.Now()
	loc, err := s.Upload(t.Context(), bucket, key, gen, -1)
	res.Seconds = time.Since(start).Seconds()
	close(done)
	wg.Wait()
	if err != nil {
		res.Error = err.Error()
	}
	res.Location = loc
	res.SHA256 = hex.EncodeToString(gen.sum.Sum(nil))
	res.PeakHeapMiB, res.PeakSysMiB = mib(peakHeap.Load()), mib(peakSys.Load())
	res.VmHWMMiB = vmHWM(t)
	j, _ := json.Marshal(res)
	fmt.Printf("\nUPLOAD_RESULT %s\n", j)
	require.NoError(t, err)
}

// raceEnabled tells whether this binary was built with -race.
func raceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// vmHWM reads the process's peak resident set size from /proc.
func vmHWM(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	require.NotNil(t, m)
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

func TestS3RunPrefix(t *testing.T) {
	key1, key2 := runner.IdempotencyKey("uid-1"), runner.IdempotencyKey("uid-2")
	p1 := runner.RunPrefix("sim-42", key1, "")
	assert.Equal(t, "sim-42/"+key1+"/", p1)
	assert.NotEqual(t, p1, runner.RunPrefix("sim-42", key2, ""), "two runs of one job name must not share a prefix")
	assert.Equal(t, p1, runner.RunPrefix("sim-42", key1, ""), "retries of one run must share its prefix")
	assert.Equal(t, "sim-42/"+key1+"/1234/", runner.RunPrefix("sim-42", key1, "1234"))
	// Path tricks and odd characters stay inside their segment.
	assert.Equal(t, "_/_/a_b/", runner.RunPrefix("..", "", "a/b"))
	assert.Equal(t, "a_b_c/k/", runner.RunPrefix("a b/c", "k", ""))
}

func TestS3Inputs(t *testing.T) {
	d, err := record.Spec{
		Backend: "local", JobScript: "scripts:run.sh", ScriptLocation: "s3",
		ScriptExtraLocation: "s3", JobParameters: "params:p.json",
		AdditionalData: "data:a.bin, data:b.bin", S3Endpoint: "127.0.0.1:9000",
	}.Parse()
	require.NoError(t, err)
	in, err := runner.S3Inputs(d)
	require.NoError(t, err)
	assert.Equal(t, []runner.S3Input{
		{Field: "jobdata.jobScript", Ref: record.ObjectRef{Bucket: "scripts", Object: "run.sh"}},
		{Field: "jobdata.jobParameters", Ref: record.ObjectRef{Bucket: "params", Object: "p.json"}},
		{Field: "jobdata.additionalData", Ref: record.ObjectRef{Bucket: "data", Object: "a.bin"}},
		{Field: "jobdata.additionalData", Ref: record.ObjectRef{Bucket: "data", Object: "b.bin"}},
	}, in)

	d, err = record.Spec{Backend: "local", JobScript: "echo hi", JobParameters: `{"a":1}`}.Parse()
	require.NoError(t, err)
	in, err = runner.S3Inputs(d)
	require.NoError(t, err)
	assert.Empty(t, in)
}

func TestS3NewStoreBadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "http://127.0.0.1:9000", "host:9000/path"} {
		_, err := runner.NewS3Store(runner.S3Config{Endpoint: ep, Credentials: dirCreds(t.TempDir())})
		var fe *backends.FieldError
		require.ErrorAs(t, err, &fe, "endpoint %q", ep)
		assert.Equal(t, "s3.endpoint", fe.Field)
	}
}

// TestS3PreflightMissingBucketSaysCreateBucket: a missing upload bucket is
// exit 2 with the three ways out, createBucket among them; with it set,
// the bucket is made.
func TestS3PreflightMissingBucketSaysCreateBucket(t *testing.T) {
	s := s3Store(t)
	name := "missing-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:20] + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	err := s.Preflight(t.Context(), nil, name, false)
	testutil.RequireFieldError(t, err, "s3upload.bucket")
	assert.Contains(t, err.Error(), "s3upload.createBucket")
	require.NoError(t, s.Preflight(t.Context(), nil, name, true))
}
