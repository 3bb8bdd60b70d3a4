package record

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// The keys of re-placement (replaceAfter; runner/replace.go).
const (
	// KeyMove is a move under way (Move, as JSON): written with a fenced
	// update before the job on its first target is asked to cancel, and
	// removed by the update that records the new placement (or when the
	// job turned out to have started).
	KeyMove = "status.move"
	// KeyMoves lists the jobs moves left behind, cancelled and never
	// started (Moved, as a JSON list), oldest first.
	KeyMoves = "status.moves"
)

// MaxMoves bounds how often one job moves: each move is a cancel and a
// submit, and the list in KeyMoves grows by one.
const MaxMoves = 4

// Move is a move under way: the job From names (FromID) is to be
// cancelled if it never started, then submitted again at To.
type Move struct {
	From   string    `json:"from"`
	FromID string    `json:"fromID"`
	To     Placed    `json:"to"`
	N      int       `json:"n"` // this move's number, from 1
	At     time.Time `json:"at"`
}

// Moved is one job a move left behind.
type Moved struct {
	Target   string    `json:"target"`
	ID       string    `json:"id"`
	To       string    `json:"to"`
	At       time.Time `json:"at"`
	Evidence string    `json:"evidence"` // the backend's own words that it never started
}

// ParseMove reads KeyMove ("" is none).
func ParseMove(v string) (*Move, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var m Move
	if err := json.Unmarshal([]byte(v), &m); err != nil || m.FromID == "" || m.To.Target == "" || m.N < 1 {
		return nil, backends.Invalid(KeyMove, "is not a move bridge-runner wrote; delete the record (cleanup) and run the step again")
	}
	return &m, nil
}

// ParseMoves reads KeyMoves ("" is none).
func ParseMoves(v string) ([]Moved, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var ms []Moved
	if err := json.Unmarshal([]byte(v), &ms); err != nil {
		return nil, backends.Invalid(KeyMoves, "is not a list of moves bridge-runner wrote; delete the record (cleanup) and run the step again")
	}
	return ms, nil
}
