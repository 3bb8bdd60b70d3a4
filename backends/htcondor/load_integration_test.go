package htcondor_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

var _ backends.LoadProber = (*htcondor.Backend)(nil)

// probe runs ProbeLoad and checks it cost ProbeCommands remote commands.
func probe(t *testing.T, b *htcondor.Backend, ctx context.Context, j backends.Job, a *backends.Array) backends.Load {
	t.Helper()
	before := b.Queries()
	load, err := b.ProbeLoad(ctx, j, a)
	if err != nil {
		t.Fatalf("ProbeLoad: %v", err)
	}
	if n := b.Queries() - before; n != htcondor.ProbeCommands {
		t.Fatalf("ProbeLoad ran %d commands, want %d", n, htcondor.ProbeCommands)
	}
	return load
}

// TestProbeLoadCountsMove: on the real pool, a probe of the quiet pool
// sees its CPUs; once jobs fill every CPU and two more wait, the probe
// sees no CPU free, the running jobs and the idle ones.
func TestProbeLoadCountsMove(t *testing.T) { testssh.EachCondor(t, testProbeLoadCountsMove) }

func testProbeLoadCountsMove(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, 4*time.Minute)
	j := job(t, "#!/bin/sh\nsleep 120\n", map[string]any{"request_cpus": 1})
	base := probe(t, b, ctx, j, nil)
	t.Logf("quiet pool: %+v", base)
	if !base.Fits || base.TotalCPUs < 1 || base.FreeCPUs < 0 || base.FreeCPUs > base.TotalCPUs || base.TotalNodes < 1 || base.JobCPUs != 1 {
		t.Fatalf("quiet pool: %+v", base)
	}
	for i := 0; i < base.TotalCPUs+2; i++ {
		id, err := b.Submit(ctx, job(t, "#!/bin/sh\nsleep 120\n", map[string]any{"request_cpus": 1}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	}
	for {
		load := probe(t, b, ctx, j, nil)
		// Not against the quiet counts: other packages' tests may use the
		// pool at the same time (go test runs packages in parallel).
		if load.FreeCPUs == 0 && load.RunningJobs >= 1 && load.PendingJobs >= 2 {
			t.Logf("loaded pool: %+v", load)
			if load.TotalCPUs != base.TotalCPUs || !load.Fits || load.FreeNodes != 0 {
				t.Fatalf("loaded pool: %+v, quiet %+v", load, base)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the probe never saw the pool full: %+v (quiet %+v)", load, base)
		case <-time.After(time.Second):
		}
	}
	arr := &backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 9}}, MaxParallel: 3}
	if load := probe(t, b, ctx, j, arr); load.JobCPUs != 3 {
		t.Fatalf("an array of 10 tasks, 3 at once, of 1 CPU: JobCPUs %d, want 3", load.JobCPUs)
	}
}

// TestProbeLoadTooBig: a job asking more CPUs, or more memory, than any
// slot of the real pool has does not fit, and Why says which.
func TestProbeLoadTooBig(t *testing.T) { testssh.EachCondor(t, testProbeLoadTooBig) }

func testProbeLoadTooBig(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, time.Minute)
	for _, c := range []struct {
		props map[string]any
		word  string
	}{
		{map[string]any{"request_cpus": 4096}, "request_cpus"},
		{map[string]any{"request_memory": "64TB"}, "request_memory"},
	} {
		load := probe(t, b, ctx, job(t, "#!/bin/sh\ntrue\n", c.props), nil)
		if load.Fits || !strings.Contains(load.Why, c.word) || load.TotalCPUs < 1 {
			t.Errorf("%v: %+v, want Fits=false naming %s", c.props, load, c.word)
		}
	}
	if load := probe(t, b, ctx, job(t, "#!/bin/sh\ntrue\n", map[string]any{"request_memory": "1 GB"}), nil); !load.Fits {
		t.Errorf("1 GB: %+v, want it to fit", load)
	}
}

// TestProbeLoadUnreachable: a submit host nobody listens on is transient.
func TestProbeLoadUnreachable(t *testing.T) { testssh.EachCondor(t, testProbeLoadUnreachable) }

func testProbeLoadUnreachable(t *testing.T, srv testssh.Server) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	be, err := htcondor.New(backends.Config{URL: strings.Replace(srv.URL, srv.Addr, addr, 1), Credentials: testssh.Creds(t, srv.CredsDir)})
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*htcondor.Backend)
	defer b.Close()
	_, err = b.ProbeLoad(testssh.Ctx(t, time.Minute), job(t, "#!/bin/sh\ntrue\n", nil), nil)
	if !errors.Is(err, backends.ErrTransient) {
		t.Fatalf("unreachable submit host: %v, want ErrTransient", err)
	}
}

// TestProbeLoadNotASubmitHost: a login node without HTCondor's commands
// (the plain test sshd, a Slurm login node) is an invalid resourceURL, not
// a pool that is away.
func TestProbeLoadNotASubmitHost(t *testing.T) {
	srv := testssh.Default(t)
	be, err := htcondor.New(backends.Config{URL: srv.URL, Credentials: testssh.Creds(t, srv.CredsDir)})
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*htcondor.Backend)
	defer b.Close()
	_, err = b.ProbeLoad(testssh.Ctx(t, time.Minute), job(t, "#!/bin/sh\ntrue\n", nil), nil)
	if !errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient) || !strings.Contains(err.Error(), "condor_status") {
		t.Fatalf("a host without condor_status: %v, want ErrInvalid naming condor_status", err)
	}
}
