package runner

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A regression test of the lease, found by the fault tests with real
// processes (cmd/bridge-runner/watch_faults_test.go).

// member is an invoke's part of group "g" in namespace ns, following the
// record of job own, that never leads (no batcher).
func member(t *testing.T, c *kube.Client, ns, own, holder string) *watchMember {
	m := &watchMember{lease: lease{c: c, ns: ns, name: "bridge-watch-g"}, group: "g", own: record.ConfigMapName(own), holder: holder,
		rps: 1, log: slog.New(slog.DiscardHandler)}
	m.newBatcher = func() (backends.StatusBatcher, func(), error) { return nil, nil, nil }
	return m
}

// A lease another invoke just took, whose watcher has not worked yet (a
// wrong token fails every query), is neither trusted nor taken from it:
// the invokes polled for themselves only after every taker's lease had
// gone stale, one after another (a wrong token cost 111 s to the last
// exit 75 with six invokes, against 31 s without the watcher).
func TestATakenLeaseIsNotTrustedUntilItsWatcherWorks(t *testing.T) {
	store := testkube.RecordStore(t)
	ctx := context.Background()
	a := member(t, store.Client, store.Namespace, "a", "host/1/1")
	b := member(t, store.Client, store.Namespace, "b", "host/2/2")
	s, err := a.lease.read(ctx)
	require.NoError(t, err)
	_, ok := a.lease.take(ctx, s, a.holder)
	require.True(t, ok)
	assert.False(t, b.live(ctx), "a lease taken but not renewed by a working watcher: poll alone")
	s, err = b.lease.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, a.holder, s.holder, "and it stays its taker's")
	assert.False(t, s.free(time.Now()))
	assert.True(t, s.free(time.Now().Add(leaseTTL)), "until its TTL ends")

	v, held, err := a.lease.renew(ctx, s.version, a.holder) // the watcher's first round worked
	require.NoError(t, err)
	require.True(t, held, v)
	b.readAt = time.Time{}
	assert.True(t, b.live(ctx), "a renewed lease is trusted")
}
