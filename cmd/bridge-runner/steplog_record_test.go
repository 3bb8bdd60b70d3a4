package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordPathSaidOnce: the record's full name is said once, at start;
// the other lines name the job by its short name. Before, every line of
// invoke's log repeated it.
func TestRecordPathSaidOnce(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	code, out := runBinary(t, "invoke", "--state-dir", state, "--job-name", "once", "--backend", "local",
		"--script", "#!/bin/sh\necho hi\n")
	require.Equal(t, 0, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Greater(t, len(lines), 4, out)
	var with []string
	for _, l := range lines {
		if strings.Contains(l, state) {
			with = append(with, l)
		}
	}
	require.Len(t, with, 1, "one line names the record's path:\n%s", out)
	assert.Contains(t, with[0], `msg="the job's record"`)
	assert.Equal(t, with[0], lines[0], "said at start")
	for _, l := range lines {
		if strings.Contains(l, `msg="job state"`) {
			assert.Contains(t, l, "job=once", "the short name")
		}
	}
}
