package slurm

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

// slurmShapes is slurmrestd's documented error shape (and 22.05's
// error_code variant), with the reason in every text field.
var slurmShapes = map[string]func(string) (string, string){
	"errors": func(r string) (string, string) {
		q := testutil.JSONString(r)
		return "application/json", `{"meta":{},"errors":[{"description":` + q + `,"error_number":2000,"error":` + q + `,"source":` + q + `}]}`
	},
	"error_code": func(r string) (string, string) {
		return "application/json", `{"errors":[{"error_code":1007,"error":` + testutil.JSONString(r) + `}]}`
	},
	"not the shape": func(r string) (string, string) {
		return "application/json", `{"message":` + testutil.JSONString(r) + `,"detail":` + testutil.JSONString(r) + `}`
	},
}

// TestHostileBodiesStayOutOfMessages: an answer that echoes the token, in
// any encoding the scrubber misses, puts none of it into the error, on
// discovery, submit, status and cancel, whatever the status. Before, a
// non-JSON body was copied (clipped at 300 bytes) and every error's
// description and error were joined in.
func TestHostileBodiesStayOutOfMessages(t *testing.T) {
	for _, r := range hostileReleases {
		t.Run(r.release, func(t *testing.T) { hostileBodiesStayOut(t, r.release, r.pinned) })
	}
}

// hostileReleases: the hostile tables run on the releases of the real
// clusters that speak jobs/state/ (24.11, 26.05), pinned to their newest API.
var hostileReleases = []struct{ release, pinned string }{{"24.11.7", "/slurm/v0.0.42/"}, {"26.05.0", "/slurm/v0.0.45/"}}

func hostileBodiesStayOut(t *testing.T, release, pinned string) {
	f := newFake(t, release)
	rd := testutil.NewRedirector(t, f.URL, false)
	creds := testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})
	id, err := newHostile(t, rd, creds, pinned).Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	ops := map[string]func(be *Backend) error{
		"submit": func(be *Backend) error { _, err := be.Submit(context.Background(), testJob(hello)); return err },
		"status": func(be *Backend) error { _, err := be.Status(context.Background(), id); return err },
		"cancel": func(be *Backend) error { return be.Cancel(context.Background(), id) },
		"probe": func(be *Backend) error {
			_, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
			return err
		},
		"statusMany": func(be *Backend) error {
			m, err := be.StatusMany(context.Background(), []string{id, "999999"})
			if err == nil { // Slurm's documented "no such job" leaves them out: what it kept is checked
				return fmt.Errorf("%w: %+v", errBatchAnswered, m)
			}
			return err
		},
		"submitArray": func(be *Backend) error {
			_, err := be.SubmitArray(context.Background(), testJob(hello), backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 3}}})
			return err
		},
		"arrayStatus": func(be *Backend) error { _, err := be.ArrayStatus(context.Background(), id); return err },
	}
	seen := 0
	for _, hb := range testutil.HostileBodies(hostileSecret, slurmShapes) {
		for _, status := range []int{400, 404, 422, 500, 502} {
			rd.Answer(nil, status, hb.ContentType, hb.Body)
			for name, op := range ops {
				for _, suffix := range []string{pinned, ""} { // pinned, and discovering
					err := op(newHostile(t, rd, creds, suffix))
					require.Error(t, err, "%s %s %d", hb.Name, name, status)
					assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", hb.Name, name, status, err)
					seen++
				}
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d failed answers, no leak", seen)
}

// errBatchAnswered marks a batched status that took a failed answer as
// "none of these jobs is known" (Slurm's documented error shape for it):
// no error, so the statuses it kept are what is checked for leaks.
var errBatchAnswered = errors.New("answered")

func newHostile(t *testing.T, rd *testutil.Redirector, creds backends.Credentials, suffix string) *Backend {
	be, err := New(backends.Config{URL: rd.Front.URL + suffix, HTTPClient: rd.Front.Client(), Credentials: creds})
	require.NoError(t, err)
	return be.(*Backend)
}

// TestFailedAnswerWording: the documented reason is kept (as words), any
// other body is named as not shown.
func TestFailedAnswerWording(t *testing.T) {
	f := newFake(t, "24.11.7")
	rd := testutil.NewRedirector(t, f.URL, false)
	be := newHostile(t, rd, testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()}), "/slurm/v0.0.42/")
	rd.Answer(nil, http.StatusBadGateway, "text/html", "<html>proxy error</html>")
	_, err := be.Status(context.Background(), "100")
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Equal(t, "GET /slurm/v0.0.42/job/100: HTTP 502 from slurmrestd (body not in the documented error shape, not shown); slurmctld's log says more", err.Error())
	_, body := slurmShapes["errors"]("Invalid partition name specified")
	rd.Answer(nil, http.StatusInternalServerError, "application/json", body)
	_, err = be.Submit(context.Background(), testJob(hello))
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.True(t, strings.HasSuffix(err.Error(), "HTTP 500 from slurmrestd: Invalid partition name specified (error 2000)"), err.Error())
}

// TestHostileProbeAnswers: each of the probe's three GETs answering with a
// hostile or unreadable body (a 200 that is not slurmrestd's JSON, a large
// one, an error shape at 500) fails the probe with an error that names the
// request and quotes none of it; a 5xx is transient (unless its error
// number says the credentials were refused), and for the queue (jobs/)
// leaves only the job counts unknown.
func TestHostileProbeAnswers(t *testing.T) {
	for _, r := range hostileReleases {
		t.Run(r.release, func(t *testing.T) { hostileProbeAnswers(t, r.release, r.pinned) })
	}
}

func hostileProbeAnswers(t *testing.T, release, pinned string) {
	f := newFake(t, release)
	rd := testutil.NewRedirector(t, f.URL, false)
	creds := testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})
	be := newHostile(t, rd, creds, pinned)
	l, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
	require.NoError(t, err)
	require.True(t, l.Fits)
	require.Equal(t, [3]int{8, 8, 0}, [3]int{l.TotalCPUs, l.FreeCPUs, l.PendingJobs})
	large := strings.Repeat("garbage "+hostileSecret+" ", 200000) // 3.2 MB
	bodies := append(testutil.HostileBodies(hostileSecret, slurmShapes), testutil.HostileBody{Name: "large", ContentType: "application/json", Body: large})
	seen := 0
	for _, ep := range []string{"/partitions/", "/nodes/", "/jobs/"} {
		match := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ep) }
		for _, hb := range bodies {
			for _, status := range []int{200, 500, 503} {
				rd.Answer(match, status, hb.ContentType, hb.Body)
				l, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
				if ep == "/jobs/" && err == nil {
					// A queue that does not come leaves its counts unknown.
					assert.Equal(t, [3]int{-1, -1, -1}, [3]int{l.PendingJobs, l.RunningJobs, l.PendingCPUs}, "%s %d", hb.Name, status)
					assert.Equal(t, 8, l.FreeCPUs)
					assert.GreaterOrEqual(t, status, 500, hb.Name)
					seen++
					continue
				}
				require.Error(t, err, "%s %s %d", ep, hb.Name, status)
				assert.Contains(t, err.Error(), ep, "%s %s %d", ep, hb.Name, status)
				assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", ep, hb.Name, status, err)
				if status >= 500 { // or refused credentials, where the shape says so (error 1007)
					assert.True(t, errors.Is(err, backends.ErrTransient) || errors.Is(err, backends.ErrAuth), "%s %s %d: %s", ep, hb.Name, status, err)
				}
				seen++
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d hostile answers to the probe, no leak", seen)
}

// TestSSHCommandOutputStaysOutOfMessages: what a login node's commands
// print (a profile's banner, a wrapper's noise, an echo of the
// credentials in any encoding) reaches no error but the reason of a line
// in Slurm's documented error shape, as words; anything else is named by
// its size. Before, up to 2,000 bytes of stderr (or stdout) were quoted.
func TestSSHCommandOutputStaysOutOfMessages(t *testing.T) {
	target, err := sshexec.ParseURL("ssh://alice@login.example")
	require.NoError(t, err)
	c := sshexec.New(target, testutil.MapCreds{}, nil, sshexec.Options{})
	const noise = "motd-banner-words"
	seen := 0
	for _, secret := range []string{hostileSecret, "Tangerine wobbly HARPSICHORD of lantern"} {
		for _, f := range testutil.HostileForms(secret) {
			for _, cmd := range []string{"sbatch", "squeue", "sacct", "scancel", "scontrol"} {
				for _, res := range []sshexec.Result{
					{ExitCode: 1, Stderr: []byte(noise + " " + f.Text + "\n" + cmd + ": error: Invalid account " + f.Text + "\n"), Stdout: []byte(noise + f.Text)},
					{ExitCode: 1, Stderr: []byte("slurm_load_jobs error: Invalid job id " + f.Text + "\n")},
					{ExitCode: 1, Stderr: []byte(noise + " " + f.Text), Stdout: []byte(f.Text + " " + noise)},
					{ExitCode: 1, Stdout: []byte(noise + " " + f.Text + "\n" + cmd + ": fatal: " + f.Text)},
				} {
					for _, msg := range []string{slurmCLI.Said(cmd, res), c.CommandError(slurmCLI, cmd, res, "jobproperties").Error()} {
						assert.NotContains(t, msg, noise)
						if secret == hostileSecret { // a passphrase's plain words are the runner's scrubber's (runner/secrets.go)
							assert.Empty(t, testutil.Leaks(msg, secret), "%s %s: %s", f.Name, cmd, msg)
						}
						seen++
					}
				}
			}
		}
	}
	t.Logf("%d messages, no leak", seen)
	assert.Equal(t, "Invalid account …", slurmCLI.Said("sbatch", sshexec.Result{Stderr: []byte("sbatch: error: Invalid account pw-Hostile-9f3a\n")}))
	assert.Equal(t, "Invalid job id specified", slurmCLI.Said("scontrol", sshexec.Result{Stderr: []byte("slurm_load_jobs error: Invalid job id specified\n")}))
	assert.Equal(t, "sbatch wrote 14 bytes to stderr and 3 bytes to stdout that are not a documented error, not shown",
		slurmCLI.Said("sbatch", sshexec.Result{Stderr: []byte("Welcome, alice"), Stdout: []byte("hi\n")}))
	assert.Equal(t, "scancel wrote nothing", slurmCLI.Said("scancel", sshexec.Result{ExitCode: 1}))
}

// messageBuilders are the calls whose arguments become a message.
var messageBuilders = map[string]bool{"Errorf": true, "Sprintf": true, "Invalid": true, "Transient": true, "New": true,
	"NewFault": true, "Fprintf": true, "Printf": true}

// TestNoRemoteOutputInMessages walks the non-test sources of the backends
// that run commands over SSH and fails on a message built from a
// command's output other than through sshexec.System.Said: a Stdout or
// Stderr field (but its len), or a .Text() of it, among the arguments of
// fmt.Errorf, backends.Invalid and the like. The next command's error
// cannot quote the login node.
func TestNoRemoteOutputInMessages(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{".", "../htcondor", "../sshexec"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			require.NoError(t, err)
			checked++
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !messageBuilders[sel.Sel.Name] {
					return true
				}
				for _, arg := range call.Args {
					ast.Inspect(arg, func(n ast.Node) bool {
						switch x := n.(type) {
						case *ast.CallExpr:
							if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "len" {
								return false // a size is no text
							}
							if s, ok := x.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Text" && len(x.Args) == 0 {
								t.Errorf("%s: a command's text in a message; use sshexec.System.Said", fset.Position(x.Pos()))
							}
						case *ast.SelectorExpr:
							if x.Sel.Name == "Stdout" || x.Sel.Name == "Stderr" {
								t.Errorf("%s: a command's %s in a message; use sshexec.System.Said", fset.Position(x.Pos()), x.Sel.Name)
							}
						}
						return true
					})
				}
				return false // its arguments are checked, nested builders with them
			})
		}
	}
	assert.Greater(t, checked, 20, "the walk found the sources")
}
