package ray

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bridge-runner/bridge-runner/backends"
)

// fakeRay speaks the Ray Jobs REST API as the dashboard of Ray 2.60 does
// (observed against the real one, see integration_test.go), with the
// variations of older releases where they matter:
//
//   - errors are plain text (text/plain), many of them Python tracebacks;
//   - POST /api/jobs/ only with the slash (/api/jobs is "404: Not Found");
//   - an unknown job is 404 "Job X does not exist" on every per-job route;
//   - a duplicate submission_id is 400 with the ValueError traceback (Ray
//     < 2.9, dupStatus 400) or 500 with the head's RuntimeError traceback
//     that relays the agent's 400 (Ray >= 2.9, the default);
//   - a request without entrypoint is 400 with a TypeError traceback;
//   - token mode (Ray >= 2.52): no Authorization header is 401 "Unauthorized:
//     Missing authentication token", a wrong one 403 "Forbidden: Invalid
//     authentication token";
//   - stop answers {"stopped": false} for a job that has ended;
//   - GET /api/jobs/ lists every job's details in a JSON array, the jobs
//     of drivers started with ray.init (type DRIVER, no submission_id)
//     among them;
//   - logs are {"logs": "<the whole driver log>"};
//   - GET /api/cluster_status is {"result": true, "msg", "data"} with the
//     autoscaler's loadMetricsReport: each resource as [used, total];
//   - logs/tail is a WebSocket that sends the log from its first byte in
//     TEXT messages of at most 10 lines or about 20,000 characters, looks
//     for more every tailPoll, and closes once the job has ended and a look
//     after that found nothing new (Ray's JobManager.tail_job_logs).
type fakeRay struct {
	t *testing.T
	*httptest.Server

	mu        sync.Mutex
	jobs      map[string]*fakeJob
	order     []string
	token     string // token mode when non-empty
	dupStatus int
	failNext  []int // statuses to answer the next requests with
	requests  []string
	lastAuth  string
}

type fakeJob struct {
	req      map[string]any
	status   string
	message  string
	errType  string
	logs     string
	exitCode *int
	start    int64
	end      int64
}

func newFakeRay(t *testing.T) *fakeRay {
	f := &fakeRay{t: t, jobs: map[string]*fakeJob{}, dupStatus: http.StatusInternalServerError}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func plain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}

func jsonOK(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

const tracebackHead = "Traceback (most recent call last):\n  File \"/ray/dashboard/modules/job/job_head.py\", line 419, in submit_job\n    resp = await job_agent_client.submit_job_internal(submit_request)\n"

func (f *fakeRay) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.lastAuth = r.Header.Get("Authorization")
	if f.token != "" {
		switch h := r.Header.Get("Authorization"); {
		case h == "":
			plain(w, 401, "Unauthorized: Missing authentication token")
			return
		case h != "Bearer "+f.token:
			plain(w, 403, "Forbidden: Invalid authentication token")
			return
		}
	}
	if len(f.failNext) > 0 {
		st := f.failNext[0]
		f.failNext = f.failNext[1:]
		plain(w, st, http.StatusText(st))
		return
	}
	path := r.URL.Path
	switch {
	case path == "/api/version" && r.Method == http.MethodGet:
		jsonOK(w, map[string]string{"version": "4", "ray_version": "2.60.0"})
	case path == "/api/jobs/" && r.Method == http.MethodPost:
		f.submit(w, r)
	case path == "/api/jobs/" && r.Method == http.MethodGet:
		f.list(w)
	case path == "/api/cluster_status" && r.Method == http.MethodGet:
		f.clusterStatus(w)
	case strings.HasPrefix(path, "/api/jobs/"):
		f.jobRoute(w, r, strings.TrimPrefix(path, "/api/jobs/"))
	default:
		plain(w, 404, "404: Not Found")
	}
}

// jobRoute serves /api/jobs/{id}[/sub] (f.mu held).
func (f *fakeRay) jobRoute(w http.ResponseWriter, r *http.Request, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	j := f.jobs[id]
	if j == nil {
		plain(w, 404, fmt.Sprintf("Job %s does not exist", id))
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		jsonOK(w, f.details(id, j))
	case sub == "stop" && r.Method == http.MethodPost:
		stopped := j.status == "PENDING" || j.status == "RUNNING"
		if stopped {
			j.status, j.message, j.end = "STOPPED", "Job was intentionally stopped.", time.Now().UnixMilli()
		}
		jsonOK(w, map[string]bool{"stopped": stopped})
	case sub == "logs" && r.Method == http.MethodGet:
		jsonOK(w, map[string]string{"logs": j.logs})
	case sub == "logs/tail" && r.Method == http.MethodGet:
		f.mu.Unlock() // the stream lasts; it takes the lock for each look
		f.tail(w, r, id)
		f.mu.Lock()
	default:
		plain(w, 405, "405: Method Not Allowed")
	}
}

func (f *fakeRay) submit(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		plain(w, 400, tracebackHead+"json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)")
		return
	}
	if _, ok := req["entrypoint"]; !ok {
		plain(w, 400, tracebackHead+"TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'")
		return
	}
	id, _ := req["submission_id"].(string)
	if id == "" {
		id = fmt.Sprintf("raysubmit_%d", len(f.order)+1)
	}
	if f.jobs[id] != nil {
		dup := fmt.Sprintf("ValueError: Job with submission_id %s already exists. Please use a different submission_id.", id)
		if f.dupStatus == 400 {
			plain(w, 400, tracebackHead+dup)
		} else {
			plain(w, 500, tracebackHead+"RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n  File \"job_manager.py\", line 553, in submit_job\n    raise ValueError(\n"+dup+"\n.")
		}
		return
	}
	f.jobs[id] = &fakeJob{req: req, status: "PENDING", message: "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available.", start: time.Now().UnixMilli()}
	f.order = append(f.order, id)
	jsonOK(w, map[string]string{"job_id": id, "submission_id": id})
}

func (f *fakeRay) details(id string, j *fakeJob) map[string]any {
	d := map[string]any{
		"type": "SUBMISSION", "job_id": nil, "submission_id": id, "driver_info": nil,
		"status": j.status, "entrypoint": j.req["entrypoint"], "message": j.message,
		"error_type": nil, "start_time": j.start, "end_time": nil,
		"metadata": j.req["metadata"], "runtime_env": j.req["runtime_env"],
		"driver_agent_http_address": "http://127.0.0.1:52365", "driver_node_id": "abc",
		"driver_exit_code": nil,
	}
	if j.errType != "" {
		d["error_type"] = j.errType
	}
	if j.end != 0 {
		d["end_time"] = j.end
	}
	if j.exitCode != nil {
		d["driver_exit_code"] = *j.exitCode
	}
	return d
}

// list serves GET /api/jobs/ (f.mu held): the submitted jobs, with a
// driver's job before them as a cluster where someone ran ray.init has.
func (f *fakeRay) list(w http.ResponseWriter) {
	out := []map[string]any{{
		"type": "DRIVER", "job_id": "01000000", "submission_id": nil, "status": "RUNNING",
		"entrypoint": "", "message": nil, "error_type": nil, "start_time": time.Now().UnixMilli(), "end_time": nil,
		"metadata": map[string]string{}, "runtime_env": map[string]any{}, "driver_info": map[string]any{"id": "01000000"},
	}}
	for _, id := range f.order {
		out = append(out, f.details(id, f.jobs[id]))
	}
	jsonOK(w, out)
}

// set changes a job as the cluster would.
func (f *fakeRay) set(id string, fn func(j *fakeJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.jobs[id])
}

func (f *fakeRay) job(id string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

func (f *fakeRay) fail(statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = append(f.failNext, statuses...)
}

// memCreds is a Credentials over a map, absent keys failing as a mounted
// Secret without the key does (an ErrInvalid).
type memCreds struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *memCreds) Get(names ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if v := strings.TrimSpace(c.m[n]); v != "" {
			return v, nil
		}
	}
	return "", backends.Invalid("credentials", "none of the keys %s is in the Secret", strings.Join(names, ", "))
}

func (c *memCreds) set(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = v
}

// tailPoll is how often the fake's log stream looks for more (Ray: 1 s).
const tailPoll = 20 * time.Millisecond

var upgrader = websocket.Upgrader{}

// tail streams job id's log as Ray's logs/tail does.
func (f *fakeRay) tail(w http.ResponseWriter, r *http.Request, id string) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	sent, ended := 0, false
	for {
		f.mu.Lock()
		j := f.jobs[id]
		logs, terminal := j.logs, j.status != "PENDING" && j.status != "RUNNING"
		f.mu.Unlock()
		if len(logs) <= sent {
			if ended {
				_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				return
			}
			ended = terminal
			time.Sleep(tailPoll)
			continue
		}
		chunk, lines := logs[sent:], 0
		for i := 0; i < len(chunk); i++ {
			if chunk[i] == '\n' {
				if lines++; lines == 10 {
					chunk = chunk[:i+1]
					break
				}
			}
			if i >= 20000 {
				chunk = chunk[:i+1]
				break
			}
		}
		if conn.WriteMessage(websocket.TextMessage, []byte(chunk)) != nil {
			return
		}
		sent += len(chunk)
	}
}

// TestStatusManyReadsTheList: StatusMany asks Ray's job list once and says
// of each asked job what Status says; jobs not asked for, a driver's job
// and unknown ids are left out; a failed or unreadable answer is an error
// to retry that shows none of the body.
func TestStatusManyReadsTheList(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	ctx := context.Background()
	keys := []string{"br-run", "br-failed", "br-done", "br-pending", "br-not-asked"}
	for _, k := range keys {
		j := pyJob("print(1)")
		j.Key = k
		_, err := be.Submit(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
	}
	three := 3
	f.set("br-run", func(j *fakeJob) { j.status, j.message = "RUNNING", "Job is currently running." })
	f.set("br-failed", func(j *fakeJob) {
		j.status, j.errType, j.exitCode, j.end = "FAILED", "JOB_SUPERVISOR_ACTOR_DIED", &three, time.Now().UnixMilli()
	})
	f.set("br-done", func(j *fakeJob) { j.status, j.end = "SUCCEEDED", time.Now().UnixMilli() })
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()

	asked := []string{"br-run", "br-failed", "br-done", "br-pending", "br-unknown", "01000000"}
	got, err := be.StatusMany(ctx, asked)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	reqs := append([]string(nil), f.requests...)
	f.mu.Unlock()
	if len(reqs) != 1 || reqs[0] != "GET /api/jobs/" {
		t.Fatalf("one call sent %v, want the one list request", reqs)
	}
	if len(got) != 4 {
		t.Fatalf("got %d statuses, want the 4 asked jobs Ray has (no unknown id, no driver's job_id): %v", len(got), got)
	}
	for _, id := range asked[:4] {
		one, err := be.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[id], one) {
			t.Errorf("%s: StatusMany says %+v, Status %+v", id, got[id], one)
		}
	}
	if st := got["br-failed"]; st.State != backends.Failed || st.FailureCategory() != backends.CategoryInfrastructure {
		t.Errorf("br-failed: %+v", st)
	}

	f.fail(http.StatusServiceUnavailable)
	if _, err := be.StatusMany(ctx, asked); !errors.Is(err, backends.ErrTransient) {
		t.Fatalf("a 503: want a transient error, got %v", err)
	}
}

// TestParseJobList: the list is a JSON array of JobDetails; anything else
// is a fault, not an empty list that would hide every job.
func TestParseJobList(t *testing.T) {
	list, err := parseJobList([]byte(`[null, {"submission_id": "a", "status": "RUNNING", "driver_exit_code": null}, {"type": "DRIVER", "job_id": "02000000", "status": "SUCCEEDED"}]`))
	if err != nil || len(list) != 3 || *list[1].SubmissionID != "a" || list[2].SubmissionID != nil {
		t.Fatalf("%v %v", list, err)
	}
	if list, err := parseJobList([]byte(`[]`)); err != nil || len(list) != 0 {
		t.Fatalf("an empty list: %v %v", list, err)
	}
	for _, body := range []string{`null`, `{"detail": "pw-secret"}`, `<html>pw-secret</html>`, `[1, "pw-secret"]`, ``} {
		_, err := parseJobList([]byte(body))
		if !errors.Is(err, backends.ErrTransient) || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%q: want a transient error without the body, got %v", body, err)
		}
	}
}

// clusterStatus answers GET /api/cluster_status as Ray 2.60's dashboard
// does (its envelope and the autoscaler's loadMetricsReport, trimmed): one
// node of 1 CPU, which a RUNNING job holds (f.mu held).
func (f *fakeRay) clusterStatus(w http.ResponseWriter) {
	used := 0.0
	for _, j := range f.jobs {
		if j.status == rayRunning {
			used = 1
		}
	}
	node := map[string][]float64{"CPU": {used, 1}, "memory": {0, 17153035469}, "node:127.0.0.1": {0, 1}}
	jsonOK(w, map[string]any{"result": true, "msg": "Got cluster status.", "data": map[string]any{
		"autoscalingStatus": "Cluster status: 0 nodes", "autoscalingError": nil,
		"clusterStatus": map[string]any{"loadMetricsReport": map[string]any{
			"usage": node, "usageByNode": map[string]any{"492ece042f7c": node}, "resourceDemand": []any{},
		}},
	}})
}
