package runner_test

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
)

// A target that answers its probe and then goes dark (every connection
// refused) before the submit: the attempt fails as temporary (exit 75),
// nothing having reached the target, and its retry places the job anew,
// on b, instead of failing on a again. One job in all.
func TestRetryAfterTheTargetWentDarkIsPlacedAnew(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(4, 4, 0), nil)
	tc.b.SetLoad(loadOf(1, 4, 0), nil)
	dark := &darkAfterProbe{Backend: tc.a}
	require.NoError(t, tc.reg.Register("fakea2", func(backends.Config) (backends.Backend, error) { return dark, nil }))
	iv := tc.invoker("")
	iv.Spec.Targets = `[{"name":"a","backend":"fakea2","resourceURL":"https://a.example.org:6820"},` +
		`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b"}]`
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient, "exit 75: a retry may succeed")
	d := tc.record()
	assert.Empty(t, d[record.KeyIntent], "nothing reached a: the intent is let go of")
	assert.Empty(t, d[record.KeyPlacement], "and so is the placement on a")
	assert.Empty(t, tc.a.Jobs())

	retry := tc.invoker("")
	retry.Spec.Targets = iv.Spec.Targets
	require.NoError(t, retry.Run(context.Background()))
	assert.Equal(t, "DONE", retry.Result().Status)
	assert.Equal(t, "b", retry.Result().Target, "placed anew where it can run")
	assert.Empty(t, tc.a.Jobs())
	assert.Len(t, tc.b.Jobs(), 1)
}

// A submit that may have reached the target (here: its answer failed
// after the connection was made) keeps the intent and the placement: the
// job may run there, and a retry re-attaches to it there, never elsewhere.
func TestRetryAfterASubmitThatMayHaveLandedStaysPlaced(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(4, 4, 0), nil)
	tc.b.SetLoad(loadOf(1, 4, 0), nil)
	tc.a.SubmitFaults = []error{backends.Transient(errLost), backends.Transient(errLost), backends.Transient(errLost),
		backends.Transient(errLost), backends.Transient(errLost), backends.Transient(errLost), backends.Transient(errLost),
		backends.Transient(errLost), backends.Transient(errLost), backends.Transient(errLost), backends.Transient(errLost)}
	iv := tc.invoker("")
	err := iv.Run(context.Background())
	require.Error(t, err)
	d := tc.record()
	p, perr := record.ParsePlaced(d[record.KeyPlacement])
	require.NoError(t, perr)
	require.NotNil(t, p, "the placement stays: the submit may have landed on a")
	assert.Equal(t, "a", p.Target)
	assert.Empty(t, tc.b.Jobs())
}

var errLost = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

// darkAfterProbe is cluster a that answers one probe and then refuses
// every connection, as a host that went down.
type darkAfterProbe struct {
	*fake.Backend
	mu   sync.Mutex
	dark bool
}

func (d *darkAfterProbe) isDark() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dark
}

func refused() error {
	return backends.Transient(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
}

func (d *darkAfterProbe) ProbeLoad(ctx context.Context, job backends.Job, a *backends.Array) (backends.Load, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dark {
		return backends.Load{}, refused()
	}
	d.dark = true
	return d.Backend.ProbeLoad(ctx, job, a)
}

func (d *darkAfterProbe) Submit(ctx context.Context, j backends.Job) (string, error) {
	if d.isDark() {
		return "", refused()
	}
	return d.Backend.Submit(ctx, j)
}

func (d *darkAfterProbe) FindByKey(ctx context.Context, key string) (string, error) {
	if d.isDark() {
		return "", refused()
	}
	return d.Backend.FindByKey(ctx, key)
}
