package runner

import (
	"github.com/bridge-runner/bridge-runner/record"
)

// voidPlacement lets go of the record d's placement when a submit gave up
// without any request reaching the placed target (notSubmitted: the
// target went dark between the probe and the submit) and the run let go
// of its submit intent: nothing of this record can run anywhere, so the
// next attempt (the step's retry after exit 75) places the job anew, on
// the targets as its own probes find them, instead of failing on the dark
// one again. A chunked array with a chunk submitted keeps its placement:
// those chunks run there. It reports whether it changed d.
func voidPlacement(d map[string]string) bool {
	if d[record.KeyPlacement] == "" || d[record.KeyID] != "" || d[record.KeyIntent] != "" || len(recordedChunks(d[record.KeyArrayChunks])) > 0 {
		return false
	}
	record.Set(d, record.KeyArrayChunks, "") // only the size a submit fixed for the dark target's limit
	return record.Set(d, record.KeyPlacement, "")
}
