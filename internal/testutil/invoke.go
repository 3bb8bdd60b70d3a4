package testutil

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// InvokeInProcess runs the invoke step in this process, with a file record,
// for spec on the backend be (registered under spec.Backend), copying the
// job's output to out every logInterval. It is for benchmarks of backends
// whose servers are fakes in the test process.
func InvokeInProcess(tb testing.TB, be backends.Backend, spec record.Spec, out io.Writer, logInterval time.Duration) *runner.Result {
	tb.Helper()
	reg := backends.NewRegistry()
	if err := reg.Register(spec.Backend, func(backends.Config) (backends.Backend, error) { return be, nil }); err != nil {
		tb.Fatal(err)
	}
	iv := &runner.Invoker{JobName: "bench", Store: record.NewFileStore(tb.TempDir(), "bench"), Registry: reg, Spec: &spec,
		Log: slog.New(slog.DiscardHandler), LogOut: out, LogInterval: logInterval}
	if err := iv.Run(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return iv.Result()
}
