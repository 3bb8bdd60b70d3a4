package slurm

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// The records of GET job/{id} for an array 0-5%3 with three tasks started,
// in the shapes the real servers answered (trimmed to the fields read).
const (
	array2205 = `{"jobs":[
{"job_id":3273,"array_job_id":3273,"array_task_id":null,"array_task_string":"3-5%3","job_state":"PENDING","state_reason":"JobArrayTaskLimit","exit_code":0,"comment":"k"},
{"job_id":3276,"array_job_id":3273,"array_task_id":2,"array_task_string":"","job_state":"RUNNING","exit_code":0,"comment":"k"},
{"job_id":3275,"array_job_id":3273,"array_task_id":1,"array_task_string":"","job_state":"FAILED","exit_code":768,"comment":"k"},
{"job_id":3274,"array_job_id":3273,"array_task_id":0,"array_task_string":"","job_state":"COMPLETED","exit_code":0,"comment":"k"}]}`
	array2411 = `{"jobs":[
{"job_id":250,"array_job_id":{"set":true,"infinite":false,"number":250},"array_task_id":{"set":false,"infinite":false,"number":0},"array_task_string":"3-5%3","job_state":["PENDING"],"comment":"k"},
{"job_id":252,"array_job_id":{"set":true,"infinite":false,"number":250},"array_task_id":{"set":true,"infinite":false,"number":2},"array_task_string":"","job_state":["RUNNING"],"comment":"k"},
{"job_id":251,"array_job_id":{"set":true,"infinite":false,"number":250},"array_task_id":{"set":true,"infinite":false,"number":1},"array_task_string":"","job_state":["FAILED"],"exit_code":{"status":["EXITED"],"return_code":{"set":true,"infinite":false,"number":3}},"comment":"k"},
{"job_id":257,"array_job_id":{"set":true,"infinite":false,"number":250},"array_task_id":{"set":true,"infinite":false,"number":0},"array_task_string":"","job_state":["COMPLETED"],"exit_code":{"status":["SUCCESS"],"return_code":{"set":true,"infinite":false,"number":0}},"comment":"k"}]}`
)

func TestArrayTasksOfBothShapes(t *testing.T) {
	for _, c := range []struct{ name, body, id string }{{"22.05", array2205, "3273"}, {"24.11", array2411, "250"}} {
		t.Run(c.name, func(t *testing.T) {
			var jr jobsResponse
			require.NoError(t, json.Unmarshal([]byte(c.body), &jr))
			tasks := arrayTasks(jr.Jobs, c.id)
			require.Len(t, tasks, 3, "the tasks not started are left out: %+v", tasks)
			assert.Equal(t, backends.Done, tasks[0].State)
			assert.Equal(t, backends.Failed, tasks[1].State)
			require.NotNil(t, tasks[1].ExitCode)
			assert.Equal(t, 3, *tasks[1].ExitCode)
			assert.Equal(t, backends.Running, tasks[2].State)
			for i := range jr.Jobs {
				assert.Equal(t, c.id, jr.Jobs[i].baseID(), "FindByKey takes every record as the array")
			}
			assert.Empty(t, arrayTasks(jr.Jobs, "999"), "another job's records")
		})
	}
}

func TestArrayCancelledBeforeStart(t *testing.T) {
	jobs := []jobInfo{{JobID: json.RawMessage(`7`), ArrayJobID: json.RawMessage(`7`), ArrayTaskString: "2-3%2",
		JobState: json.RawMessage(`"CANCELLED"`)}}
	tasks := arrayTasks(jobs, "7")
	require.Len(t, tasks, 2)
	assert.Equal(t, backends.Killed, tasks[2].State)
	assert.Equal(t, backends.Killed, tasks[3].State)

	f := parseScontrol("JobId=8 ArrayJobId=7 ArrayTaskId=4 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0")
	idx, ok := scontrolTask(f, "7")
	assert.True(t, ok)
	assert.Equal(t, 4, idx)
	_, ok = scontrolTask(parseScontrol("JobId=7 ArrayJobId=7 ArrayTaskId=5-9%2 JobState=PENDING"), "7")
	assert.False(t, ok, "the record of the tasks not started")
}

// An array's output file, which --log-dir follows, is its lowest task's,
// with Slurm's array patterns expanded (%j: the task's own id); none while
// that task waits in the record of the tasks not started.
func TestArrayOutputPathIsTheFirstTasks(t *testing.T) {
	for _, c := range []struct{ name, body, id, want string }{
		{"22.05", array2205, "3273", "/o/3273_0_3274.out slurm-3273_0.out"},
		{"24.11", array2411, "250", "/o/250_0_257.out slurm-250_0.out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var jr jobsResponse
			require.NoError(t, json.Unmarshal([]byte(c.body), &jr))
			j, err := firstTaskOf(jr.Jobs, c.id)
			require.NoError(t, err)
			named := *j
			named.StandardOutput = "/o/%A_%a_%j.out"
			assert.Equal(t, c.want, outputPath(&named, c.id)+" "+outputPath(j, c.id))
			// Task 2 started, 3-5 waiting: the lowest is 2.
			j, err = firstTaskOf([]jobInfo{jr.Jobs[0], jr.Jobs[1]}, c.id)
			require.NoError(t, err)
			assert.Equal(t, jr.Jobs[1].id(), j.id())
			// Task 2 started, 0-1 and 3-5 waiting: the first has no file yet.
			w := jr.Jobs[0]
			w.ArrayTaskString = "0-1,3-5%3"
			_, err = firstTaskOf([]jobInfo{w, jr.Jobs[1]}, c.id)
			assert.ErrorIs(t, err, backends.ErrNotFound)
		})
	}
}

// ArrayLimit reads MaxArraySize where slurmrestd serves slurm.conf (GET
// conf, v0.0.45 on); where it does not (22.05's v0.0.38, 24.11's up to
// v0.0.42), the limit is Slurm's default.
func TestArrayLimitFromConf(t *testing.T) {
	for _, c := range []struct {
		release string
		set     int
		want    int
	}{{"26.05.0", 50, 50}, {"22.05.8", 50, DefaultMaxArraySize}, {"24.11.7", 50, DefaultMaxArraySize}} {
		t.Run(c.release, func(t *testing.T) {
			h := newHarness(t, c.release, "")
			h.f.mu.Lock()
			h.f.maxArraySize = c.set
			h.f.mu.Unlock()
			n, err := h.b.ArrayLimit(context.Background())
			require.NoError(t, err)
			assert.Equal(t, c.want, n)
		})
	}
}
