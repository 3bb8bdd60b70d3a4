package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// longFixtures adds records with a long name and a long job id, as real
// runs have them.
func longFixtures(t *testing.T, dir string) {
	for job, id := range map[string]string{
		"ensemble-2026-11-29-member-0017": "raysubmit_3kq8Qz4PmJ7cWx2Lr9Ns",
		"sim-42":                          "br-39ccd9076d4288151318",
	} {
		s := record.NewFileStore(dir, job)
		_, err := s.Create(context.Background(), map[string]string{"backend": "ray",
			"resourceURL": "http://ray-head.example.org:8265", record.KeyJobStatus: "RUNNING", record.KeyID: id})
		require.NoError(t, err)
		// An age of hours, as the other fixtures have: a fresh record's
		// age turns from 0s to 1s between two runs of status compared
		// line by line (CI saw it).
		old := time.Now().Add(-3 * time.Hour)
		require.NoError(t, os.Chtimes(s.Path+".lock", old, old))
	}
}

// TestStatusFitsEightyColumns: the default table fits 80 columns (five
// columns; a job id or name too long for it shortened with "…"), while -o
// wide and JSON keep every value whole. Before, rows were 97 columns wide
// and wrapped on every 80-column terminal.
func TestStatusFitsEightyColumns(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	longFixtures(t, dir)
	r := run(t, "status", "--state-dir", dir)
	require.Equal(t, ExitDone, r.code, r.stderr)
	for _, l := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 80, "%q", l)
	}
	assert.Equal(t, []string{"NAME", "BACKEND", "STATE", "JOB-ID", "AGE"}, strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0]))
	assert.Contains(t, r.stdout, "…")
	assert.Contains(t, r.stdout, "ensemble-2026-11-29-member-0017", "the name is kept whole while the id can give way")

	r = run(t, "status", "--state-dir", dir, "-o", "wide")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Contains(t, r.stdout, "raysubmit_3kq8Qz4PmJ7cWx2Lr9Ns")
	assert.NotContains(t, r.stdout, "…")
}

// TestStatusNamesNotFound: a job asked for by name that has no record is
// an error (exit 1, naming it), as kubectl get does; the others are listed.
// Before, it was silent with exit 0.
func TestStatusNamesNotFound(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	r := run(t, "status", "--state-dir", dir, "c-ray", "no-such-job")
	assert.Equal(t, ExitFailed, r.code)
	assert.Equal(t, []string{"c-ray"}, firstColumn(r.stdout))
	assert.Contains(t, r.stderr, `job "no-such-job" has no record`)

	r = run(t, "status", "--state-dir", dir, "--state", "done", "f-local")
	assert.Equal(t, ExitDone, r.code, "found, only filtered out: not an error")
}

// TestStatusWatchTable: status -w prints the table, then a row only when
// a shown column changes (not for the message, which the table does not
// show), in the table's columns, a deleted record included. Before, a
// hidden change printed a row and "(deleted)" shifted the columns.
func TestStatusWatchTable(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	cmd := exec.Command(binary, "status", "-w", "--state-dir", dir)
	cmd.Env = processEnv(t)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(wait time.Duration) (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(wait):
			return "", false
		}
	}
	header, ok := next(20 * time.Second)
	require.True(t, ok)
	for range statusFixtures {
		_, ok := next(20 * time.Second)
		require.True(t, ok)
	}
	stateAt, idAt := strings.Index(header, "STATE"), strings.Index(header, "JOB-ID")

	update := func(job string, f func(d map[string]string)) {
		s := record.NewFileStore(dir, job)
		rec, err := s.Get(context.Background())
		require.NoError(t, err)
		f(rec.Data)
		_, err = s.Update(context.Background(), rec)
		require.NoError(t, err)
	}
	update("h-new", func(d map[string]string) { d[record.KeyMessage] = "a message the table does not show" })
	if l, ok := next(5 * time.Second); ok {
		t.Fatalf("a change of a hidden column printed a row: %q", l)
	}
	update("h-new", func(d map[string]string) { d[record.KeyJobStatus], d[record.KeyID] = "SUSPENDED", "4244" })
	l, ok := next(20 * time.Second)
	require.True(t, ok)
	assert.Equal(t, "SUSPENDED", strings.Fields(l[stateAt:])[0], "the state in its column: %q under %q", l, header)
	assert.Equal(t, "4244", strings.Fields(l[idAt:])[0])

	require.NoError(t, record.NewFileStore(dir, "c-ray").Delete(context.Background()))
	l, ok = next(20 * time.Second)
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(l, "c-ray "), l)
	assert.Equal(t, "deleted", strings.Fields(l[stateAt:])[0], "%q under %q", l, header)
	assert.Equal(t, "raysubmit_x", strings.Fields(l[idAt:])[0], "the columns after the state stay: %q", l)
}

// TestStatusOnScreen: at a real terminal (tmux) of 80 and 120 columns the
// table fits without a wrapped line, and its states are in colour; with
// NO_COLOR set, and when stdout is not a terminal, there is no colour.
func TestStatusOnScreen(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	longFixtures(t, dir)
	plain := run(t, "status", "--state-dir", dir)
	assert.NotContains(t, plain.stdout, "\x1b[", "no colour when stdout is not a terminal")
	for _, width := range []int{80, 120} {
		screen := tmuxScreen(t, width, 40, []string{"TERM=xterm-256color"}, "status", "--state-dir", dir)
		start := 0
		for start < len(screen) && !strings.HasPrefix(screen[start], "NAME ") {
			start++
		}
		require.Less(t, start, len(screen), "%s", strings.Join(screen, "\n"))
		got := screen[start : start+len(statusFixtures)+3]
		assert.Equal(t, strings.Split(strings.TrimRight(plain.stdout, "\n"), "\n"), trimRight(got), "at %d columns no row wraps", width)
	}
	coloured := tmuxScreenEscapes(t, 80, 40, []string{"TERM=xterm-256color"}, "status", "--state-dir", dir)
	assert.Contains(t, coloured, "\x1b[32mDONE", "DONE in green on a terminal")
	mute := tmuxScreenEscapes(t, 80, 40, []string{"TERM=xterm-256color", "NO_COLOR=1"}, "status", "--state-dir", dir)
	assert.NotContains(t, mute, "\x1b[32m", "NO_COLOR")
}

func trimRight(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l, " ")
	}
	return out
}

// TestStatusShowsWaitAndEfficiency: -o wide shows each job's queue wait
// (from the record's submit and start) and what it used against what it
// asked (status.efficiency), at a real terminal (tmux) too; -o json has
// both as numbers. A record without them shows <none>, one whose
// accounting was unavailable says so.
func TestStatusShowsWaitAndEfficiency(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	submit := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	for job, eff := range map[string]string{
		"m-measured":    `{"cpu":0.934,"memory":0.12,"time":0.05,"queueWaitSeconds":200,"cpuSeconds":186.8,"coreSeconds":200}`,
		"n-unavailable": `{"queueWaitSeconds":200,"unavailable":"accounting unavailable: the cluster keeps none"}`,
	} {
		_, err := record.NewFileStore(dir, job).Create(context.Background(), map[string]string{"backend": "slurm",
			"resourceURL": "https://slurm.example.org:6820", record.KeyJobStatus: "DONE", record.KeyID: "77",
			record.KeySubmit: submit.Format(time.RFC3339), record.KeyStart: submit.Add(200 * time.Second).Format(time.RFC3339),
			record.KeyEfficiency: eff})
		require.NoError(t, err)
	}
	r := run(t, "status", "--state-dir", dir, "-o", "wide")
	require.Equal(t, ExitDone, r.code, r.stderr)
	header := strings.SplitN(r.stdout, "\n", 2)[0]
	waitAt, effAt := strings.Index(header, "WAIT"), strings.Index(header, "EFFICIENCY")
	require.Positive(t, waitAt, header)
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")[1:] {
		rows[strings.Fields(l)[0]] = l
	}
	assert.Equal(t, "3m20s", strings.Fields(rows["m-measured"][waitAt:])[0])
	assert.True(t, strings.HasPrefix(rows["m-measured"][effAt:], "cpu 93% mem 12% time 5% "), rows["m-measured"])
	assert.True(t, strings.HasPrefix(rows["n-unavailable"][effAt:], "unavailable "), rows["n-unavailable"])
	assert.True(t, strings.HasPrefix(rows["a-slurm"][waitAt:], "<none> "), rows["a-slurm"])

	screen := tmuxScreen(t, 250, 40, []string{"TERM=xterm-256color"}, "status", "--state-dir", dir, "-o", "wide", "m-measured")
	assert.Contains(t, strings.Join(screen, "\n"), "cpu 93% mem 12% time 5%", "at a real terminal")

	var got struct{ Items []statusRow }
	r = run(t, "status", "--state-dir", dir, "-o", "json", "m-measured")
	require.Equal(t, ExitDone, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got.Items, 1)
	require.NotNil(t, got.Items[0].QueueWaitSeconds)
	assert.EqualValues(t, 200, *got.Items[0].QueueWaitSeconds)
	require.NotNil(t, got.Items[0].Efficiency)
	require.NotNil(t, got.Items[0].Efficiency.CPU)
	assert.InDelta(t, 0.934, *got.Items[0].Efficiency.CPU, 1e-9)
	assert.InDelta(t, 186.8, got.Items[0].Efficiency.CPUSeconds, 1e-9)
}
