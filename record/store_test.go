package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// storeContract checks the semantics every Store must have; it runs against
// the file store here and against a real kube-apiserver in kube_test.go.
func storeContract(t *testing.T, newStore func(t *testing.T) record.Store) {
	ctx := context.Background()
	t.Run("create get update conflict delete", func(t *testing.T) {
		s := newStore(t)
		_, err := s.Get(ctx)
		require.ErrorIs(t, err, record.ErrNoRecord)
		rec, err := s.Create(ctx, map[string]string{"backend": "local"})
		require.NoError(t, err)
		require.NotEmpty(t, rec.UID)
		_, err = s.Create(ctx, map[string]string{"backend": "other"})
		require.ErrorIs(t, err, record.ErrRecordExists)

		next := rec.Clone()
		next.Data["id"] = "42"
		updated, err := s.Update(ctx, next)
		require.NoError(t, err)
		assert.Equal(t, rec.UID, updated.UID, "the UID is stable across updates")
		assert.NotEqual(t, rec.Version, updated.Version)

		stale := rec.Clone()
		stale.Data["id"] = "43"
		_, err = s.Update(ctx, stale)
		require.ErrorIs(t, err, record.ErrConflict, "a write against an old version must fail")
		got, err := s.Get(ctx)
		require.NoError(t, err)
		assert.Equal(t, "42", got.Data["id"])

		require.NoError(t, s.Delete(ctx))
		require.NoError(t, s.Delete(ctx), "deleting a missing record is fine")
		_, err = s.Update(ctx, got)
		require.Error(t, err)
		again, err := s.Create(ctx, map[string]string{"backend": "local"})
		require.NoError(t, err)
		assert.NotEqual(t, rec.UID, again.UID, "a recreated record is a new run with a new UID")
	})
	t.Run("watch sees every later change", func(t *testing.T) {
		s := newStore(t)
		rec, err := s.Create(ctx, map[string]string{"backend": "local"})
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := s.Watch(wctx, rec)
		time.Sleep(200 * time.Millisecond) // let the watch start
		next := rec.Clone()
		next.Data["kill"] = "true"
		start := time.Now()
		_, err = s.Update(ctx, next)
		require.NoError(t, err)
		select {
		case got := <-ch:
			assert.Equal(t, "true", got.Data["kill"])
			t.Logf("%s: change seen after %s", s.Describe(), time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatal("the watch did not deliver the change")
		}
		cancel()
		for range ch { // the channel closes when the context ends
		}
	})
}

func TestFileStoreContract(t *testing.T) {
	storeContract(t, func(t *testing.T) record.Store { return record.NewFileStore(t.TempDir(), "job") })
}

// slowEndStore's watch ends a while after its context does, like a file
// store's poll caught in a read; sent says it has handed over a change,
// ended that it has ended.
type slowEndStore struct {
	record.Store
	sent, ended chan struct{}
}

func (s *slowEndStore) Watch(ctx context.Context, _ *record.Record) <-chan *record.Record {
	ch := make(chan *record.Record)
	go func() {
		// ch closes last, as a real watch's final act: ended is closed
		// before it (deferred the other way round, the test raced itself).
		defer close(ch)
		defer close(s.ended)
		ch <- &record.Record{UID: "u", Version: "1", Data: map[string]string{}}
		close(s.sent)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond)
	}()
	return ch
}

// A wrapped store's watch closes only once the inner watch has ended:
// a run that waits for the close before cleanup deletes the record must
// not have a read of the record still under way (it failed CI once, a
// file store's read remaking the lock file in a test's deleted directory).
func TestStatusKeysWatchEndsWithTheInnerWatch(t *testing.T) {
	inner := &slowEndStore{Store: record.NewFileStore(t.TempDir(), "job"), sent: make(chan struct{}), ended: make(chan struct{})}
	s := record.WithStatusKeys(inner, record.StatusKeysAuto, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(ctx, nil)
	<-inner.sent // the wrapper holds a change nobody reads
	cancel()
	time.Sleep(20 * time.Millisecond) // its send gives up on the ended context
	for range ch {
	}
	select {
	case <-inner.ended:
	default:
		t.Fatal("the wrapper's watch closed while the inner watch was still running")
	}
}
