package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestStatusShowsMoves: status shows where re-placement (replaceAfter)
// moved a job: -o wide's MOVES column has the count and the last move (and
// a move under way), -o json and yaml the whole list of status.moves with
// each move's evidence; a record that never moved shows <none>, and a
// status.moves edited into something bridge-runner never writes shows
// as none, as the other fields do. Before, the moves were in the record
// only (kubectl get cm -o yaml).
func TestStatusShowsMoves(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	moved := []record.Moved{
		{Target: "hpc-a", ID: "4242", To: "hpc-b", At: at, Evidence: "Slurm job 4242 was held PENDING (JobHeldUser), then Slurm job 4242 is CANCELLED, never run"},
		{Target: "hpc-b", ID: "77", To: "hpc-c", At: at.Add(time.Hour), Evidence: "Slurm job 77 is CANCELLED, never run"},
	}
	mb, err := json.Marshal(moved)
	require.NoError(t, err)
	move := record.Move{From: "hpc-a", FromID: "4300", To: record.Placed{Target: "hpc-b", Backend: "slurm", Policy: "ordered", At: at}, N: 1, At: at}
	vb, err := json.Marshal(move)
	require.NoError(t, err)
	for job, d := range map[string]map[string]string{
		"m-moved":  {record.KeyJobStatus: "RUNNING", record.KeyID: "9001", record.KeyMoves: string(mb)},
		"m-moving": {record.KeyJobStatus: "PENDING", record.KeyID: "4300", record.KeyMove: string(vb)},
		"m-edited": {record.KeyJobStatus: "PENDING", record.KeyID: "4301", record.KeyMoves: `{"not":"a list"}`, record.KeyMove: `[]`},
	} {
		d["backend"], d["resourceURL"] = "slurm", "https://slurm.example.org:6820"
		_, err := record.NewFileStore(dir, job).Create(context.Background(), d)
		require.NoError(t, err)
	}

	r := run(t, "status", "--state-dir", dir, "-o", "wide")
	require.Equal(t, ExitDone, r.code, r.stderr)
	cells := wideCells(t, r.stdout, "MOVES")
	assert.Equal(t, "2, last hpc-b/77→hpc-c", cells["m-moved"], "the count and the last move")
	assert.Equal(t, "moving hpc-a/4300→hpc-b", cells["m-moving"], "a move under way")
	assert.Equal(t, "<none>", cells["m-edited"])
	assert.Equal(t, "<none>", cells["a-slurm"], "a job that never moved")
	assert.NotContains(t, r.stdout, "never run", "the evidence is not a cell")

	var got struct {
		Items []struct {
			Name  string         `json:"name"`
			Moves []record.Moved `json:"moves"`
			Move  *record.Move   `json:"move"`
		}
	}
	r = run(t, "status", "--state-dir", dir, "-o", "json", "m-moved", "m-moving", "m-edited", "a-slurm")
	require.Equal(t, ExitDone, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got.Items, 4)
	byName := map[string]int{}
	for i, it := range got.Items {
		byName[it.Name] = i
	}
	assert.Equal(t, moved, got.Items[byName["m-moved"]].Moves, "every move, oldest first, with its evidence")
	require.NotNil(t, got.Items[byName["m-moving"]].Move)
	assert.Equal(t, move, *got.Items[byName["m-moving"]].Move)
	for _, name := range []string{"m-edited", "a-slurm"} {
		assert.Empty(t, got.Items[byName[name]].Moves, name)
		assert.Nil(t, got.Items[byName[name]].Move, name)
	}
	assert.Equal(t, 1, strings.Count(r.stdout, `"moves"`), "no empty list for a job that never moved")

	r = run(t, "status", "--state-dir", dir, "-o", "yaml", "m-moved")
	require.Equal(t, ExitDone, r.code, r.stderr)
	var fromYAML struct {
		Items []struct {
			Moves []record.Moved `json:"moves"`
		}
	}
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &fromYAML))
	require.Len(t, fromYAML.Items, 1)
	assert.Equal(t, moved, fromYAML.Items[0].Moves)
}

// wideCells is one column of a -o wide table, by job name: the cell
// under the header col, up to the next run of spaces.
func wideCells(t *testing.T, table, col string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	at := strings.Index(lines[0], col)
	require.Positive(t, at, "no column %s in %q", col, lines[0])
	at = len([]rune(lines[0][:at]))
	out := map[string]string{}
	for _, l := range lines[1:] {
		rs := []rune(l)
		require.Greater(t, len(rs), at, l)
		cell, _, _ := strings.Cut(string(rs[at:]), "   ")
		out[strings.Fields(l)[0]] = cell
	}
	return out
}
