package runner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// requireFault asserts err is a permanent Fault of class naming field.
func requireFault(t *testing.T, err error, class, field string) *record.Fault {
	t.Helper()
	require.Error(t, err)
	var f *record.Fault
	require.True(t, errors.As(err, &f), "not a Fault: %v", err)
	assert.Equal(t, class, f.Class, "%v", err)
	assert.Equal(t, field, f.Field, "%v", err)
	assert.True(t, record.Permanent(err), "a fault is permanent: %v", err)
	var fe *backends.FieldError
	assert.True(t, errors.As(err, &fe) && fe.Field == field, "a fault is a FieldError naming %s", field)
	return f
}

func TestTLSVerificationFailureIsPermanentAndNamed(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	get := func(c *http.Client, url string) error {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	c, err := NewHTTPClient("", false)
	require.NoError(t, err)
	f := requireFault(t, get(c, srv.URL), record.FaultTLS, "ca-file")
	assert.Contains(t, f.Error(), "not trust")
	assert.Contains(t, f.Error(), srv.URL)

	// Trusted CA, wrong name: the server's certificate is for 127.0.0.1 and example.com.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	c, err = NewHTTPClient(ca, false)
	require.NoError(t, err)
	require.NoError(t, get(c, srv.URL), "the CA file is trusted")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f = requireFault(t, get(c, fmt.Sprintf("https://localhost:%d/", port)), record.FaultTLS, "ca-file")
	assert.Contains(t, f.Error(), "does not name the host")

	// A backend wraps every transport failure as transient: the fault still wins.
	wrapped := backends.Transient(fmt.Errorf("GET /x: %w", f))
	assert.True(t, record.Permanent(wrapped))
	calls := 0
	_ = retryTransient(context.Background(), time.Minute, func(context.Context) error { calls++; return wrapped })
	assert.Equal(t, 1, calls, "a permanent fault is not retried")

	expired := record.TLSFault("ca-file", "https://h", x509.CertificateInvalidError{Reason: x509.Expired, Detail: "expired at noon"})
	assert.Contains(t, requireFault(t, expired, record.FaultTLS, "ca-file").Error(), "expired")

	// Connection refused stays transient.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	refused := get(c, "https://"+addr)
	assert.Nil(t, record.TLSFault("ca-file", addr, refused))
	assert.False(t, record.Permanent(refused))
}

func TestS3EndpointFaults(t *testing.T) {
	const pw = "hunter2-secret"
	_, err := NewS3Store(S3Config{Endpoint: "ak:" + pw + "@minio:9000"})
	assert.NotContains(t, requireFault(t, err, record.FaultURL, "s3.endpoint").Error(), pw)
	_, err = NewS3Store(S3Config{Endpoint: "127.0.0.1:"})
	requireFault(t, err, record.FaultURL, "s3.endpoint")
}

func TestCredentialFilesAreCapped(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), make([]byte, MaxCredentialFileBytes+1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "whole"), []byte(strings.Repeat("k", MaxCredentialFileBytes)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apikey"), []byte(strings.Repeat("k", 300)+"\n"), 0o600))
	_, err := DirCredentials{Dir: dir, Secrets: &Secrets{}}.Get("token")
	f := requireFault(t, err, record.FaultCredentials, "credentials")
	assert.Contains(t, f.Error(), filepath.Join(dir, "token"))
	b, err := readCredentialFile(filepath.Join(dir, "whole"))
	require.NoError(t, err, "a file of exactly the cap is read")
	assert.Len(t, b, MaxCredentialFileBytes)
	v, err := DirCredentials{Dir: dir, Secrets: &Secrets{}}.Get("apikey")
	require.NoError(t, err)
	assert.Len(t, v, 300)
}

func TestS3CredentialErrorsNameTheS3Flag(t *testing.T) {
	_, err := NewS3Store(S3Config{Endpoint: "minio:9000", Credentials: DirCredentials{Dir: filepath.Join(t.TempDir(), "absent"), Secrets: &Secrets{}}})
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "--s3-credentials-dir")
	assert.NotContains(t, strings.ReplaceAll(err.Error(), "--s3-credentials-dir", ""), "--credentials-dir")
}

func TestRecordedIDFingerprint(t *testing.T) {
	rec := &record.Record{UID: "uid-1", Data: map[string]string{record.KeyID: "42"}}
	assert.NoError(t, checkRecordedID(rec), "no fingerprint: a record from before, taken as it is")
	rec.Data[record.KeyIDFingerprint] = idFingerprint("uid-1", "42")
	assert.NoError(t, checkRecordedID(rec))
	rec.Data[record.KeyID] = "43"
	f := requireFault(t, checkRecordedID(rec), record.FaultRecordID, record.KeyID)
	assert.Contains(t, f.Error(), `"43"`)
	rec.Data[record.KeyID] = "42"
	rec.UID = "uid-2" // a fingerprint copied from another record
	requireFault(t, checkRecordedID(rec), record.FaultRecordID, record.KeyID)
}
