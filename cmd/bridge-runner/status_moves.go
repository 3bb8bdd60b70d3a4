package main

import (
	"fmt"
	"strings"

	"github.com/bridge-runner/bridge-runner/record"
)

// movesOf is the record's re-placements (status.moves, oldest first) and
// the move under way (status.move); a value edited into something
// bridge-runner never writes shows as none, as the other fields do.
func movesOf(d map[string]string) ([]record.Moved, *record.Move) {
	moves, err := record.ParseMoves(d[record.KeyMoves])
	if err != nil {
		moves = nil
	}
	move, err := record.ParseMove(d[record.KeyMove])
	if err != nil {
		move = nil
	}
	return moves, move
}

// movesCell is the MOVES column: how often the job moved and its last
// move ("1, last hpc-a/4242→hpc-b"), and a move under way ("moving
// hpc-a/4242→hpc-b"); "" for a job that never moved. The evidence is
// left to -o json and yaml: it is a sentence, not a cell.
func movesCell(moves []record.Moved, move *record.Move) string {
	var parts []string
	if n := len(moves); n > 0 {
		last := moves[n-1]
		parts = append(parts, fmt.Sprintf("%d, last %s/%s→%s", n, last.Target, last.ID, last.To))
	}
	if move != nil {
		parts = append(parts, fmt.Sprintf("moving %s/%s→%s", move.From, move.FromID, move.To.Target))
	}
	return strings.Join(parts, "; ")
}
