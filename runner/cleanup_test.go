package runner_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/backends/local"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

func (h *harness) cleaner() *runner.Cleaner {
	return &runner.Cleaner{Store: h.store, Registry: h.reg, RetryBudget: time.Second, Wait: 2 * time.Second, SubmitLease: time.Second}
}

func TestCleanupCancelsARunningJobAndDeletes(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyJobStatus] == "RUNNING"
	}, time.Minute, 20*time.Millisecond)

	res, err := h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled)
	assert.True(t, res.Deleted)
	assert.Equal(t, "fake-1", res.ID)
	require.NoError(t, <-done)
	assert.Equal(t, "KILLED", iv.Result().Status, "the live invoker saw kill=true and reported KILLED")
	_, err = h.store.Get(context.Background())
	assert.ErrorIs(t, err, record.ErrNoRecord)
	assert.GreaterOrEqual(t, h.fake.Count("cancel"), 1)
	// Each built the backend once and closed it (the SSH backends' Close
	// ends their connection).
	assert.Equal(t, 2, h.fake.Count("close"), "invoke and cleanup each close the backend they built")
}

func TestCleanupWithoutInvokerCancelsByKey(t *testing.T) {
	// invoke died after submitting but before recording the id.
	h := newHarness(t, nil)
	h.fake.LoseResponses = 1
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	iv.Registry = blindFinderRegistry(t, h.fake) // its lookup by key fails too
	iv.RetryBudget = 50 * time.Millisecond
	iv.SubmitLease = 100 * time.Millisecond // gives up before finding it
	_ = iv.Run(context.Background())
	require.Len(t, h.fake.Jobs(), 1)

	c := h.cleaner()
	c.Wait = 0
	res, err := c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled)
	assert.True(t, res.Deleted)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled, "the job was found by its key and cancelled")
}

func TestCleanupIsIdempotent(t *testing.T) {
	h := newHarness(t, nil)
	res, err := h.cleaner().Run(context.Background())
	require.NoError(t, err, "no record is fine")
	assert.False(t, res.Cancelled)
	assert.False(t, res.Deleted)

	iv := h.invoker(h.spec(`{"run":"10ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	res, err = h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.False(t, res.Cancelled, "a finished job is not cancelled")
	assert.True(t, res.Deleted)
	assert.Contains(t, res.Reason, "DONE")
	assert.Zero(t, h.fake.Count("cancel"))
	_, err = h.cleaner().Run(context.Background())
	require.NoError(t, err)
}

// slurmHarness registers the fake as "slurm", so that a record that names
// no backend but a slurmrestd URL is served by it, as invoke would choose.
func slurmHarness(t *testing.T) *harness {
	h := newHarness(t, nil)
	h.reg = backends.NewRegistry()
	require.NoError(t, h.reg.Register("slurm", h.fake.Factory()))
	require.NoError(t, h.reg.Register("local", h.fake.Factory()))
	return h
}

// submitted puts a running fake job in place and returns its id.
func submitted(t *testing.T, f *fake.Backend, key string) string {
	id, err := f.Submit(context.Background(), backends.Job{Name: "job", Key: key, Properties: []byte(`{"run":"1h"}`)})
	require.NoError(t, err)
	return id
}

func createRecord(t *testing.T, h *harness, data map[string]string) *record.Record {
	rec, err := h.store.Create(context.Background(), data)
	require.NoError(t, err)
	return rec
}

// TestCleanupIBMRecordChoosesSlurmAsInvokeDoes: IBM's operator writes
// resourceURL and id and no backend key. The old cleanup called the
// description invalid and deleted the record with the job running.
func TestCleanupIBMRecordChoosesSlurmAsInvokeDoes(t *testing.T) {
	h := slurmHarness(t)
	id := submitted(t, h.fake, "ibm")
	createRecord(t, h, map[string]string{"resourceURL": "https://slurm.example:6820/slurm/v0.0.37/", "jobdata.jobScript": "#!/bin/sh\nsleep 600\n",
		"id": id, "jobStatus": "RUNNING"})
	res, err := h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, id, res.ID)
	assert.True(t, res.Cancelled, res.Reason)
	assert.True(t, res.Deleted)
	require.NotNil(t, h.fake.Jobs()[0].Cancelled, "the IBM record's job was cancelled")
}

// TestCleanupBackendChoice: a record whose URL says nothing is refused
// (exit 2, kept) without a choice, and cleaned up with --backend.
func TestCleanupBackendChoice(t *testing.T) {
	h := slurmHarness(t)
	id := submitted(t, h.fake, "k")
	createRecord(t, h, map[string]string{"resourceURL": "http://" + closedPort(t), "jobdata.jobScript": "true", "id": id})
	res, err := h.cleaner().Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.False(t, res.Deleted)
	assert.Nil(t, h.fake.Jobs()[0].Cancelled)
	assert.Equal(t, "true", h.record()[record.KeyKill], "kill=true is in for a later invoke or cleanup")

	c := h.cleaner()
	c.BackendChoice = "slurm"
	res, err = c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled && res.Deleted, res.Reason)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled)
}

// TestCleanupIntentBackendDownKeepsRecord: invoke died after submitting
// (intent, no id) and the backend is out of reach: the lookup by key fails,
// so the record stays and the error is temporary (exit 75). The old cleanup
// ignored the failed lookup and deleted the record.
func TestCleanupIntentBackendDownKeepsRecord(t *testing.T) {
	h := newHarness(t, nil)
	rec := createRecord(t, h, (&record.Spec{Backend: "fake", JobScript: "true", JobProperties: `{"run":"1h"}`}).Data())
	submitted(t, h.fake, runner.IdempotencyKey(rec.UID))
	rec.Data[record.KeyIntent] = "elsewhere/1/2@" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	_, err := h.store.Update(context.Background(), rec)
	require.NoError(t, err)
	h.fake.SetDown(true)

	res, err := h.cleaner().Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.False(t, res.Deleted)
	assert.False(t, res.Cancelled)
	assert.Contains(t, res.Reason, "idempotency key")
	assert.NotContains(t, res.Reason, "5ecret", "no server text in the summary")
	d := h.record()
	assert.Equal(t, "true", d[record.KeyKill])
	assert.NotEmpty(t, d[record.KeyIntent], "the job is still tracked")

	h.fake.SetDown(false)
	res, err = h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled && res.Deleted, res.Reason)
	assert.Equal(t, "fake-1", res.ID)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled)
}

// TestCleanupCancelNotAcceptedKeepsRecord: the record names a running job
// and the backend does not take the cancel: kept, temporary; --force
// deletes it and says the job was not cancelled.
func TestCleanupCancelNotAcceptedKeepsRecord(t *testing.T) {
	h := newHarness(t, nil)
	rec := createRecord(t, h, (&record.Spec{Backend: "fake", JobScript: "true"}).Data())
	id := submitted(t, h.fake, runner.IdempotencyKey(rec.UID))
	rec.Data[record.KeyID], rec.Data[record.KeyJobStatus] = id, "RUNNING"
	_, err := h.store.Update(context.Background(), rec)
	require.NoError(t, err)
	h.fake.SetDown(true)

	c := h.cleaner()
	c.Wait = 0
	res, err := c.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.False(t, res.Deleted)
	assert.False(t, res.Cancelled)
	assert.Contains(t, res.Reason, "not accepted")
	assert.Equal(t, "true", h.record()[record.KeyKill])

	c.Force = true
	res, err = c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Deleted)
	assert.False(t, res.Cancelled)
	assert.Contains(t, res.Reason, "--force")
}

// TestCleanupFinishesAPendingCancel: invoke recorded a cancel the backend
// never accepted (RUNNING, kill=true); cleanup cancels and deletes.
func TestCleanupFinishesAPendingCancel(t *testing.T) {
	h := newHarness(t, nil)
	rec := createRecord(t, h, (&record.Spec{Backend: "fake", JobScript: "true"}).Data())
	id := submitted(t, h.fake, runner.IdempotencyKey(rec.UID))
	rec.Data[record.KeyID], rec.Data[record.KeyJobStatus], rec.Data[record.KeyKill] = id, "RUNNING", "true"
	_, err := h.store.Update(context.Background(), rec)
	require.NoError(t, err)
	c := h.cleaner()
	c.Wait = 0
	res, err := c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled && res.Deleted, res.Reason)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled)
}

// TestCleanupOwnerCheck: the exit handler of a refused run (another
// Workflow) leaves the first run's job and record alone; the same run's
// cleanup (another node of it) and a person's (no owner) act.
func TestCleanupOwnerCheck(t *testing.T) {
	h := newHarness(t, nil)
	rec := createRecord(t, h, (&record.Spec{Backend: "fake", JobScript: "true"}).Data())
	id := submitted(t, h.fake, runner.IdempotencyKey(rec.UID))
	first := "Workflow a (uid 1111) node a.main.job.invoke"
	rec.Data[record.KeyID], rec.Data[record.KeyJobStatus], rec.Data[record.KeyOwner] = id, "RUNNING", first
	_, err := h.store.Update(context.Background(), rec)
	require.NoError(t, err)

	c := h.cleaner()
	c.Wait = 0
	c.Owner = "Workflow b (uid 2222) node b.onExit"
	res, err := c.Run(context.Background())
	require.NoError(t, err, "not an error: this run has nothing to clean up")
	assert.False(t, res.Deleted)
	assert.False(t, res.Cancelled)
	assert.Equal(t, first, res.Owner)
	assert.Contains(t, res.Reason, "another run")
	assert.Nil(t, h.fake.Jobs()[0].Cancelled)
	assert.Zero(t, h.fake.Count("cancel"))
	assert.Empty(t, h.record()[record.KeyKill], "the other run's record is not written")

	c.Owner = "Workflow a (uid 1111) node a.onExit"
	res, err = c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled && res.Deleted, res.Reason)
}

func TestRunOf(t *testing.T) {
	assert.Equal(t, "Workflow a (uid 1)", runner.RunOf("Workflow a (uid 1) node a.main.job(1:b).invoke"))
	assert.Equal(t, "Job j (uid 2)", runner.RunOf("Job j (uid 2) index 3"))
	assert.Equal(t, "Job j (uid 2)", runner.RunOf("Job j (uid 2)"))
	assert.NotEqual(t, runner.RunOf("Workflow a (uid 1) node a.x"), runner.RunOf("Workflow b (uid 2) node b.x"))
}

// TestCleanupForgetsLocalFiles: the file store's lock and the local job's
// directory go with the record.
func TestCleanupForgetsLocalFiles(t *testing.T) {
	dir := t.TempDir()
	store := record.NewFileStore(dir, "job")
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register(local.Name, local.New))
	iv := &runner.Invoker{JobName: "job", Store: store, Registry: reg, Backend: backends.Config{DataDir: dir},
		Spec: &record.Spec{Backend: "local", JobScript: "true"}, MinPoll: 20 * time.Millisecond}
	require.NoError(t, iv.Run(context.Background()))
	id := iv.Result().ID
	require.DirExists(t, dir+"/local-jobs/"+id)
	require.FileExists(t, store.Path+".lock")
	res, err := (&runner.Cleaner{Store: store, Registry: reg, Backend: backends.Config{DataDir: dir}, RetryBudget: time.Second}).Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Deleted)
	assert.NoFileExists(t, store.Path+".lock")
	assert.NoDirExists(t, dir+"/local-jobs/"+id)
	entries, err := os.ReadDir(dir + "/local-jobs")
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestInvokeKillWithIntentCancelsTheJob: cleanup could not reach the
// backend and left kill=true on a record with a submit intent and no id.
// The next invoke must not say "nothing was submitted" and write KILLED
// while the job runs (cleanup would then delete the record as ended): it
// finds the job by key, cancels it, and only then reports KILLED.
func TestInvokeKillWithIntentCancelsTheJob(t *testing.T) {
	h := newHarness(t, nil)
	rec := createRecord(t, h, (&record.Spec{Backend: "fake", JobScript: "true", UpdateInterval: "0.5"}).Data())
	submitted(t, h.fake, runner.IdempotencyKey(rec.UID))
	rec.Data[record.KeyIntent] = "elsewhere/1/2@" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	rec.Data[record.KeyKill] = "true"
	_, err := h.store.Update(context.Background(), rec)
	require.NoError(t, err)
	iv := h.invoker(nil)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, "fake-1", iv.Result().ID, "the job found by key")
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled, "and cancelled")
	assert.Equal(t, "fake-1", h.record()[record.KeyID])
}
