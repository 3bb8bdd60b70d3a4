package runner

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestJobLogTextNamesEveryTaskByItsIndex: job.log has one line per index
// of the user's array, in order, with the chunk that ran it and its task
// number there, even for tasks the backend does not list yet (PENDING).
func TestJobLogTextNamesEveryTaskByItsIndex(t *testing.T) {
	arr, err := backends.ParseArray("0-2,5-6")
	require.NoError(t, err)
	one, three := 1, 3
	a := &arrayBackend{arr: arr}
	a.tasks = map[int]backends.Status{
		0: {State: backends.Done, Raw: "COMPLETED", ExitCode: new(int)},
		1: {State: backends.Failed, Raw: "FAILED", ExitCode: &three},
		5: {State: backends.Running, Raw: "RUNNING"},
		6: {State: backends.Failed, Raw: "OUT_OF_MEMORY", ExitCode: &one},
	}
	a.last = foldArray(arr, a.tasks)
	logOf := func(i int) string {
		if i == 2 {
			return "-"
		}
		return "s3://b/tasks/" + strconv.Itoa(i) + ".log"
	}
	got := jobLogText("10@0+11@5", a, logOf)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, lines, 2+5, got)
	assert.True(t, strings.HasPrefix(lines[0], "# array 10@0+11@5: 5 tasks: "), lines[0])
	assert.Equal(t, []string{
		"0\t10\t0\tDONE\tCOMPLETED\t0\ts3://b/tasks/0.log",
		"1\t10\t1\tFAILED\tFAILED\t3\ts3://b/tasks/1.log",
		"2\t10\t2\tPENDING\t-\t-\t-",
		"5\t11\t0\tRUNNING\tRUNNING\t-\ts3://b/tasks/5.log",
		"6\t11\t1\tFAILED\tOUT_OF_MEMORY\t1\ts3://b/tasks/6.log",
	}, lines[2:])
}
