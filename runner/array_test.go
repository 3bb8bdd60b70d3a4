package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
)

// A job array is one job to the step: one submit, one status query per
// poll for all its tasks, one record with the tasks' counts, the indexes
// of those that did not end DONE (as the array key takes them, for a
// retry of only those) and their first exit codes.
func TestArrayFoldsItsTasksIntoOneRecord(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"pending":"100ms","run":"300ms","failIndexes":[2,4,5]}`)
	spec.Array = "0-5,9%3"
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	assert.Equal(t, "FAILED", res.Status, "an array with a failed task FAILED")
	assert.Equal(t, "DONE=4 FAILED=3", res.ArrayCounts)
	assert.Equal(t, "2,4-5", res.ArrayFailed)
	assert.Equal(t, "3", res.ExitCode, "the first failed task's exit code")
	assert.Contains(t, res.Message, "array fake-1: 7 tasks: DONE=4 FAILED=3")
	d := h.record()
	assert.Equal(t, "DONE=4 FAILED=3", d[record.KeyArrayCounts])
	assert.Equal(t, "2,4-5", d[record.KeyArrayFailed])
	assert.Equal(t, "2:3 4:3 5:3", d[record.KeyArrayExitCodes])
	assert.Equal(t, 1, h.fake.Count("submit"), "one submit for the whole array")
	assert.Zero(t, h.fake.Count("status"), "the tasks are read with ArrayStatus")
	assert.Positive(t, h.fake.Count("arraystatus"))

	// The failed indexes are an array key: a retry of only those.
	retry := h.spec(`{"run":"50ms"}`)
	retry.Array = res.ArrayFailed
	h2 := newHarness(t, nil)
	iv = h2.invoker(retry)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "DONE=3", iv.Result().ArrayCounts)
	assert.Empty(t, iv.Result().ArrayFailed)
}

func TestArrayKilledCancelsEveryTask(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"60s"}`)
	spec.Array = "1-4"
	iv := h.invoker(spec)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(500 * time.Millisecond)
		cancel() // SIGTERM
	}()
	_ = iv.Run(ctx)
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, "KILLED=4", iv.Result().ArrayCounts)
	assert.Equal(t, 1, h.fake.Count("cancel"), "one cancel of the array's id ends every task")
}

func TestArrayRefusedWhereThereAreNone(t *testing.T) {
	h := newHarness(t, nil)
	plain := fake.WithoutFinder(h.fake)
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return plain, nil }))
	h.reg = reg
	for _, c := range []struct{ array, field string }{{"0-3", "array"}, {"0-3,x", "array"}} {
		spec := h.spec(`{}`)
		spec.Array = c.array
		err := h.invoker(spec).Run(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalid, c.array)
		assert.Contains(t, err.Error(), c.field)
	}
	assert.Zero(t, h.fake.Count("submit"), "nothing submitted")
}

// The step's log says an array's tasks by state as they change, and the
// last count (every task ended) before the line of the array's end.
func TestArrayTasksInTheStepLog(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"pending":"100ms","run":"300ms","failIndexes":[2]}`)
	spec.Array = "0-5%2"
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	logs := h.logs.String()
	var tasks []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `msg="array tasks"`) {
			tasks = append(tasks, line)
		}
	}
	require.GreaterOrEqual(t, len(tasks), 2, "a line when the counts change:\n%s", logs)
	assert.Contains(t, tasks[0], "pending", "at first tasks wait")
	assert.Contains(t, tasks[len(tasks)-1], `tasks="5 done, 1 failed" of=6`)
	last := strings.Index(logs, `tasks="5 done, 1 failed"`)
	end := strings.LastIndex(logs, `msg="job state"`)
	assert.Less(t, last, end, "the final count comes before the final state's line:\n%s", logs)
}
