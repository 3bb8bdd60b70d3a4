package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// A job that fills the disk must not lose its exit code: writing state.json
// (a new file, renamed into place) needs space the job may have used up.
// So the supervisor reserves end.json before it starts the job, filled with
// spaces (real blocks, not a sparse file), and when state.json cannot be
// written at the end it overwrites the reservation in place, which needs
// no new space, then keeps trying state.json until space is back.

const (
	endFile    = "end.json"
	endReserve = 4096 // bytes: a state is a few hundred
	// maxJobFile caps what is read of job.json and state.json: the job's
	// description is at most a ConfigMap's 1 MiB; a file swapped for a
	// device or a FIFO in the job's directory is refused, never read.
	maxJobFile   = 8 << 20
	endRetry     = 2 * time.Second
	endRetryUpTo = 24 * time.Hour
)

// reserveEnd creates end.json with endReserve bytes of spaces.
func reserveEnd(dir string) error {
	return os.WriteFile(filepath.Join(dir, endFile), bytes.Repeat([]byte{' '}, endReserve), 0o600)
}

// writeEnd records the final state: in state.json if it can, else in the
// reserved end.json (in place), retrying state.json until it lands or
// endRetryUpTo passes. It reports whether the end is recorded anywhere.
func writeEnd(dir string, st *state) bool {
	if writeState(dir, st) == nil {
		return true
	}
	reserved := writeReserved(dir, st) == nil
	for deadline := time.Now().Add(endRetryUpTo); time.Now().Before(deadline); {
		time.Sleep(endRetry)
		if writeState(dir, st) == nil {
			return true
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			break // the job's directory was deleted: nobody will ask
		}
	}
	return reserved
}

// writeReserved overwrites end.json in place with st, padded with spaces.
func writeReserved(dir string, st *state) error {
	buf, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if len(buf) > endReserve {
		return errors.New("state larger than the reservation")
	}
	f, err := os.OpenFile(filepath.Join(dir, endFile), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(append(buf, bytes.Repeat([]byte{' '}, endReserve-len(buf))...), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readReserved returns the end recorded in end.json, or nil.
func readReserved(dir string) *state {
	buf, _, err := backends.ReadLocalFile(filepath.Join(dir, endFile), endReserve)
	if err != nil {
		return nil
	}
	buf = bytes.TrimSpace(buf)
	var st state
	if len(buf) == 0 || json.Unmarshal(buf, &st) != nil || st.Ended == nil {
		return nil
	}
	return &st
}
