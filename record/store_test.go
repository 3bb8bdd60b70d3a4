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
