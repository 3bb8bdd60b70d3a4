package record

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bridge-runner/bridge-runner/backends"
)

// requireFault asserts err is a permanent Fault of class naming field.
func requireFault(t *testing.T, err error, class, field string) *Fault {
	t.Helper()
	require.Error(t, err)
	var f *Fault
	require.True(t, errors.As(err, &f), "not a Fault: %v", err)
	assert.Equal(t, class, f.Class, "%v", err)
	assert.Equal(t, field, f.Field, "%v", err)
	assert.True(t, Permanent(err), "a fault is permanent: %v", err)
	var fe *backends.FieldError
	assert.True(t, errors.As(err, &fe) && fe.Field == field, "a fault is a FieldError naming %s", field)
	return f
}

func TestKubeForbiddenNamesVerbResourceAndTheRole(t *testing.T) {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "j-bridge-cm",
		errors.New(`User "system:serviceaccount:wf:default" cannot update resource "configmaps" in API group "" in the namespace "wf"`))
	got := KubeErr(err)
	f := requireFault(t, got, FaultForbidden, "rbac")
	for _, want := range []string{"system:serviceaccount:wf:default", "update configmaps", "namespace wf", "workflows/rbac", "ServiceAccount"} {
		assert.Contains(t, f.Error(), want)
	}
	assert.False(t, errors.Is(got, backends.ErrTransient))
	// A message the pattern does not know still says what to do.
	odd := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no reason given"))
	assert.Contains(t, requireFault(t, KubeErr(odd), FaultForbidden, "rbac").Error(), "workflows/rbac")
}

func TestKubeMissingNamespaceIsPermanent(t *testing.T) {
	err := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "nowhere")
	f := requireFault(t, KubeErr(err), FaultNamespace, "namespace")
	assert.Contains(t, f.Error(), "nowhere")
	// A missing ConfigMap is not a fault: the store reports ErrNoRecord.
	assert.Nil(t, kubeFault(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "j-bridge-cm")))
}

func TestKubeOutagesStayTransient(t *testing.T) {
	for _, err := range []error{
		apierrors.NewServiceUnavailable("etcd down"),
		apierrors.NewTimeoutError("slow", 1),
		apierrors.NewTooManyRequests("slow down", 1),
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		context.DeadlineExceeded,
	} {
		got := KubeErr(err)
		assert.True(t, errors.Is(got, backends.ErrTransient), "%v", err)
		assert.False(t, Permanent(got), "%v", err)
	}
}

func TestFileFaults(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOTDIR, syscall.EISDIR, syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENAMETOOLONG} {
		err := fileFault("/x/j-bridge-cm.json", &os.PathError{Op: "open", Path: "/x/j-bridge-cm.json", Err: errno})
		f := requireFault(t, err, FaultStateDir, "state-dir")
		assert.Contains(t, f.Error(), "/x/j-bridge-cm.json")
	}
	full := fileFault("/x/j", &os.PathError{Op: "write", Path: "/x/j", Err: syscall.ENOSPC})
	assert.True(t, errors.Is(full, backends.ErrTransient), "a full disk may empty again: %v", full)
	assert.False(t, Permanent(full))
	assert.Nil(t, fileFault("/x", nil))
}

// TestFileStoreOnAFileIsAStateDirFault: the real file store on paths that
// cannot work (root ignores permissions, so these are shapes, not modes).
func TestFileStoreOnAFileIsAStateDirFault(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	recDir := filepath.Join(dir, "recdir")
	require.NoError(t, os.MkdirAll(filepath.Join(recDir, "j-bridge-cm.json"), 0o700))
	lockDir := filepath.Join(dir, "lockdir")
	require.NoError(t, os.MkdirAll(filepath.Join(lockDir, "j-bridge-cm.json.lock"), 0o700))
	for name, d := range map[string]string{"state dir is a file": file, "below a file": filepath.Join(file, "sub"),
		"record is a directory": recDir, "lock is a directory": lockDir} {
		t.Run(name, func(t *testing.T) {
			_, err := NewFileStore(d, "j").Get(context.Background())
			requireFault(t, err, FaultStateDir, "state-dir")
		})
	}
}

func TestJobNames(t *testing.T) {
	for _, ok := range []string{"a", "job-1", "a.b", "sim-42.run-3", strings.Repeat("a", MaxJobNameLen)} {
		assert.NoError(t, ValidateJobName(ok), ok)
	}
	for _, bad := range []string{"", "a..b", "x.-y", "x-.y", "-x", "x-", "X", "my_job", "a/b", strings.Repeat("a", MaxJobNameLen+1)} {
		requireFault(t, ValidateJobName(bad), FaultJobName, "job-name")
	}
	assert.LessOrEqual(t, len(strings.Repeat("a", MaxJobNameLen)+longFileSuffix), nameMax)
	assert.LessOrEqual(t, len(strings.Repeat("a", MaxJobNameLen)+cmSuffix), 253)
	// The longest name accepted works in the file store.
	s := NewFileStore(t.TempDir(), strings.Repeat("a", MaxJobNameLen))
	_, err := s.Create(context.Background(), map[string]string{"backend": "local"})
	require.NoError(t, err)
	_, err = s.Update(context.Background(), &Record{UID: "nope"})
	assert.ErrorIs(t, err, ErrConflict)
}

func TestNamespaces(t *testing.T) {
	assert.NoError(t, ValidateNamespace("default"))
	for _, bad := range []string{"", "Bad_NS", "a.b", strings.Repeat("n", 64), "-x"} {
		requireFault(t, ValidateNamespace(bad), FaultNamespace, "namespace")
	}
}

func TestURLsWithUserInfoOrBadPorts(t *testing.T) {
	const pw = "hunter2-secret"
	for _, raw := range []string{"https://u:" + pw + "@h:8443", "http://u:" + pw + "@h:bad port/x", "u:" + pw + "@h:9000", "https://" + pw + "@h", "ssh://u:" + pw + "@h:22"} {
		err := checkResourceURL("resourceURL", raw)
		f := requireFault(t, err, FaultURL, "resourceURL")
		assert.NotContains(t, f.Error(), pw, "the refused value is not echoed")
		err = CheckS3Endpoint(raw)
		f = requireFault(t, err, FaultURL, "s3.endpoint")
		assert.NotContains(t, f.Error(), pw)
	}
	for _, raw := range []string{"http://h:0", "http://h:65536", "http://h:99999999999999999999"} {
		requireFault(t, checkResourceURL("resourceURL", raw), FaultURL, "resourceURL")
	}
	for _, raw := range []string{"", "http://h", "https://h:8443/api", "http://[::1]:6820", "ssh://alice@login.example:2222/dir"} {
		assert.NoError(t, checkResourceURL("resourceURL", raw), raw)
	}
	for _, ep := range []string{"127.0.0.1:", "h:0", "h:65536", "[::1]:", "h:x"} {
		requireFault(t, CheckS3Endpoint(ep), FaultURL, "s3.endpoint")
	}
	for _, ep := range []string{"", "h", "h:9000", "[::1]:9000", "[::1]", "10.0.0.1:443"} {
		assert.NoError(t, CheckS3Endpoint(ep), ep)
	}
}

func TestDurations(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "Inf", "-Inf", "1e300", "-1e300", "9223372036.9"} {
		_, err := parseInterval(v)
		f := requireFault(t, err, FaultDuration, "updateInterval")
		assert.NotContains(t, f.Error(), "2562047h", "an overflow is not printed as a wrapped duration")
	}
	for _, v := range []string{"-5", "-1s", "0", "3601"} {
		_, err := parseInterval(v)
		assert.ErrorIs(t, err, backends.ErrInvalid, v)
	}
	d, err := parseInterval("1.5")
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, d)
	requireFault(t, CheckDuration("wait", -time.Second, 0, time.Hour), FaultDuration, "--wait")
	requireFault(t, CheckDuration("retry-budget", 1<<62, time.Second, time.Hour), FaultDuration, "--retry-budget")
	assert.NoError(t, CheckDuration("wait", 0, 0, time.Hour))
}
