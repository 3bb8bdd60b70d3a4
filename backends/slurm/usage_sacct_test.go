package slurm

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
)

// failures records the assertions that failed, for checking a check.
type failures []string

func (f *failures) Errorf(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// TestSacctWithoutTheRequest: the line slurmdbd 22.05 kept of a 3 s job
// beside hack/noise.sh's jobs (sacct -j 423: TimelimitRaw empty, ReqMem
// NO_VAL) matches figures that claim no limit and no memory, and no others;
// a whole line is still compared as it was. The old comparison failed on
// it ("" against "0", 18446744073709551616.00M against 0M).
func TestSacctWithoutTheRequest(t *testing.T) {
	lost := sacctLine{allocCPUs: "1", elapsedRaw: "3", timelimitRaw: "", totalCPU: "00:00.008", reqMem: "18446744073709551616.00M"}
	whole := sacctLine{allocCPUs: "1", elapsedRaw: "3", timelimitRaw: "2", totalCPU: "00:00.010", reqMem: "64M"}
	asked := backends.Usage{TimeLimit: 2 * time.Minute, ReqMemBytes: 64 << 20}
	for _, c := range []struct {
		name  string
		line  sacctLine
		usage backends.Usage
		fails int
	}{
		{"lost, none claimed", lost, backends.Usage{}, 0},
		{"lost, yet claimed", lost, asked, 2},
		{"whole, matched", whole, asked, 0},
		{"whole, none claimed", whole, backends.Usage{}, 2},
	} {
		var f failures
		checkRequestAgainstSacct(&f, c.line, c.usage)
		assert.Len(t, f, c.fails, "%s: %v", c.name, f)
	}
}
