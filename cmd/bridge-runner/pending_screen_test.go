package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrapLine: a log line at a terminal is broken at spaces into lines of
// at most the width, the later ones indented; nothing is lost, and a word
// longer than a line is cut rather than left for the terminal to break.
func TestWrapLine(t *testing.T) {
	line := `time=06:47:14 level=INFO msg="job pending: it has not started" job=held backend=slurm job_id=1695 reason=BeginTime waited=0s`
	got := strings.Split(wrapLine(line, 40, logIndent), "\n")
	require.Greater(t, len(got), 1)
	for i, l := range got {
		assert.LessOrEqual(t, len(l), 40, "line %d: %q", i, l)
		if i > 0 {
			assert.True(t, strings.HasPrefix(l, logIndent), "line %d is indented: %q", i, l)
		}
	}
	assert.Equal(t, line, unwrapLog(got)[0], "unwrapped, the line as it was")
	long := "x=" + strings.Repeat("y", 100)
	for _, l := range strings.Split(wrapLine(long, 40, logIndent), "\n") {
		assert.LessOrEqual(t, len(l), 40, "a long word is cut: %q", l)
	}
	assert.Equal(t, "short line", wrapLine("short line", 40, logIndent))
}

// unwrapLog joins the lines of a log a terminal showed back into its
// records: a line under logIndent continues the one before.
func unwrapLog(lines []string) []string {
	var recs []string
	for _, l := range lines {
		if strings.HasPrefix(l, logIndent) && len(recs) > 0 {
			recs[len(recs)-1] += " " + strings.TrimPrefix(l, logIndent)
			continue
		}
		if strings.TrimSpace(l) != "" {
			recs = append(recs, l)
		}
	}
	return recs
}

// TestPendingJobOnScreen: a job that cannot start yet (this test's own, on
// the real Slurm: --begin an hour from now) watched at an 80-column
// terminal. Its log says the scheduler's reason and how long the job has
// waited at once and again as a heartbeat a minute later, then that it
// gives up at --pending-limit; no line is wider than the screen (tmux -J:
// none was wrapped by the terminal), and the records, unwrapped and with
// times, ids and ages masked, are the expected ones. Before, each log line
// ran to 150-250 columns and the terminal broke it mid-word.
func TestPendingJobOnScreen(t *testing.T) {
	clearEnv(t)
	c := slurmClusters(t)[0]
	state := t.TempDir()
	screen := tmuxCapture(t, tmuxRun{width: 80, height: 50, joined: true, timeout: 3 * time.Minute},
		"invoke", "--state-dir", state, "--job-name", "pend-screen", "--backend", "slurm",
		"--resource-url", c.url, "--credentials-dir", c.creds, "--watcher=false", "--update-interval", "2",
		"--pending-limit", "75s", "--script", "#!/bin/sh\n#SBATCH --begin=now+3600\n#SBATCH -p debug\nhostname\n")
	var logLines []string
	for i, l := range screen {
		if strings.HasPrefix(l, "{") {
			continue // stdout's one JSON summary line is for programs
		}
		assert.LessOrEqual(t, len([]rune(l)), 80, "screen line %d was wrapped by the terminal: %q", i, l)
		logLines = append(logLines, l)
	}
	recs := unwrapLog(logLines)
	id := regexp.MustCompile(`job_id=(\d+)`).FindStringSubmatch(strings.Join(recs, "\n"))
	require.NotNil(t, id, "the screen:\n%s", strings.Join(screen, "\n"))
	mask := strings.NewReplacer(id[1], "ID", state, "STATE")
	ages := regexp.MustCompile(`\b(time|waited|took)=[0-9:.a-zµ]+|after [0-9.hms]+ \(`)
	var pending, msgs []string
	for _, r := range recs {
		r = ages.ReplaceAllStringFunc(mask.Replace(r), func(s string) string {
			if strings.HasPrefix(s, "after") {
				return "after AGE ("
			}
			return s[:strings.IndexByte(s, '=')+1] + "AGE"
		})
		if m := regexp.MustCompile(`msg=("[^"]*"|\S+)`).FindStringSubmatch(r); m != nil {
			msgs = append(msgs, strings.Trim(m[1], `"`))
		}
		if strings.Contains(r, `msg="job pending: it has not started"`) {
			pending = append(pending, r)
		}
	}
	want := `time=AGE level=INFO msg="job pending: it has not started" job=pend-screen backend=slurm job_id=ID reason=BeginTime waited=AGE message="Slurm job ID is PENDING (BeginTime)" pending_limit=1m15s`
	require.Len(t, pending, 2, "said at once, then a heartbeat a minute later:\n%s", strings.Join(recs, "\n"))
	assert.Equal(t, []string{want, want}, pending)
	assert.Subset(t, msgs, []string{"the job's record", "submitted", "job state", "job pending: it has not started",
		"cancelling the remote job", "job ended", "invoke failed"})
	waited := func(rec string) time.Duration {
		m := regexp.MustCompile(`waited=(\S+)`).FindStringSubmatch(rec)
		require.NotNil(t, m, rec)
		d, err := time.ParseDuration(m[1])
		require.NoError(t, err)
		return d
	}
	var raw []string
	for _, r := range recs {
		if strings.Contains(r, `msg="job pending: it has not started"`) {
			raw = append(raw, r)
		}
	}
	assert.GreaterOrEqual(t, waited(raw[1])-waited(raw[0]), 55*time.Second, "the heartbeat says the wait grew")
	assert.Contains(t, strings.Join(recs, "\n"), "(the scheduler's reason: BeginTime), over its pendingLimit of 1m15s")
}
