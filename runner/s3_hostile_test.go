package runner_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestS3BadRequestOnAKeyIsPermanent: an S3 server that answers 400 for an
// input's key (too long, a name it cannot hold) refuses that request as it
// is; the same request fails again, so it is exit 2 naming the input's
// field before anything is submitted, not a fault retried into exit 75.
// Throttling (429) and 5xx stay transient. The fake answers as versitygw
// does: a HEAD's error has no body, a GET's the S3 XML error shape.
func TestS3BadRequestOnAKeyIsPermanent(t *testing.T) {
	for _, c := range []struct {
		status    int
		permanent bool
	}{{http.StatusBadRequest, true}, {http.StatusTooManyRequests, false}, {http.StatusServiceUnavailable, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" { // ListBuckets
				w.Header().Set("Content-Type", "application/xml")
				_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult><Buckets><Bucket><Name>inputs</Name></Bucket></Buckets></ListAllMyBucketsResult>`))
				return
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(c.status)
			if r.Method != http.MethodHead {
				_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>KeyTooLongError</Code><Message>Your key is too long</Message></Error>`))
			}
		}))
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "accesskey"), []byte("ak-abcdef"), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "secretkey"), []byte("sk-abcdef"), 0o600))
		s, err := runner.NewS3Store(runner.S3Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Credentials: dirCreds(dir)})
		require.NoError(t, err)
		ref := record.ObjectRef{Bucket: "inputs", Object: "data/" + strings.Repeat("k", 20)}
		err = s.Preflight(t.Context(), []runner.S3Input{{Field: "jobdata.additionalData", Ref: ref}}, "", false)
		if c.permanent {
			requireFieldOnly(t, err, "jobdata.additionalData")
			assert.Contains(t, err.Error(), "HTTP 400")
		} else {
			require.ErrorIs(t, err, backends.ErrTransient, "%d: %v", c.status, err)
			require.NotErrorIs(t, err, backends.ErrInvalid)
		}
		_, _, err = s.Open(t.Context(), ref, "jobdata.jobScript")
		if c.permanent {
			requireFieldOnly(t, err, "jobdata.jobScript")
			assert.Contains(t, err.Error(), "KeyTooLongError", "the documented error code is named")
		} else {
			require.ErrorIs(t, err, backends.ErrTransient, "%d: %v", c.status, err)
		}
		srv.Close()
	}
}

// requireFieldOnly is requireField without the real S3 server's keys.
func requireFieldOnly(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, backends.ErrInvalid, "error: %v", err)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, field, fe.Field, "error: %v", err)
	assert.NotContains(t, err.Error(), "sk-abcdef")
}
