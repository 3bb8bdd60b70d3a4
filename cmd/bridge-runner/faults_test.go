package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// faultTableMarkdown is faultTable as the troubleshooting guide's rows.
func faultTableMarkdown() string {
	var b strings.Builder
	for _, r := range faultTable {
		fmt.Fprintf(&b, "| %s | %d | %s |\n", r.Fault, r.Exit, r.Do)
	}
	return b.String()
}

// TestFaultTableInTroubleshooting: the troubleshooting guide's fault table
// is faultTable, row for row.
func TestFaultTableInTroubleshooting(t *testing.T) {
	doc := readDoc(t, "docs/guides/troubleshooting.md")
	assert.Contains(t, doc, "|---|---|---|\n"+faultTableMarkdown(), "update the Faults table of docs/guides/troubleshooting.md to:\n%s", faultTableMarkdown())
}

// TestFaultTableEveryRow: each row of the fault table is the first to match
// a fault of its class, and gives its exit code. The classes are made here
// by the runner's own validators where they are exported; how the runner
// recognizes the others (RBAC, TLS, file system, ...) is tested in runner,
// and every class end to end in the hostile-input suite.
func TestFaultTableEveryRow(t *testing.T) {
	mk := func(class string) error { return &record.Fault{Class: class, Field: "f", Msg: "m"} }
	samples := []error{
		&runner.SubmittedFault{ID: "42", Err: mk(record.FaultCredentials)}, // past the submit: no exit 2
		mk(record.FaultForbidden),
		record.ValidateNamespace("Bad_NS"),
		record.ValidateJobName("a..b"),
		mk(record.FaultStateDir),
		mk(record.FaultURL),
		backends.Transient(fmt.Errorf("GET /x: %w", mk(record.FaultTLS))), // TLS wins over the transport's "transient"
		record.CheckDuration("grace-period", -time.Second, time.Second, time.Hour),
		mk(record.FaultCredentials),
		mk(record.FaultRecordID),
		backends.Invalid("jobproperties", "bad"),
		backends.Transient(errors.New("connection refused")),
		errors.New("something nobody foresaw"),
	}
	require.Len(t, samples, len(faultTable), "one sample per row")
	for i, err := range samples {
		require.Error(t, err, "row %d", i)
		got := faultRowOf(err)
		assert.Equal(t, faultTable[i].Fault, got.Fault, "sample %d (%v) falls in the wrong row", i, err)
		assert.Equal(t, faultTable[i].Exit, exitCode(nil, err), "sample %d", i)
		if faultTable[i].Exit == ExitInvalid {
			var fe *backends.FieldError
			assert.True(t, errors.As(err, &fe) && fe.Field != "", "a permanent fault names its field: %v", err)
		}
	}
	assert.Equal(t, ExitInvalid, exitCode(nil, usageError{record.ValidateJobName("x.-y")}), "a usage error keeps its class")
}
