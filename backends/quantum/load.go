package quantum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// ProbeRequests is how many service requests ProbeLoad sends (IAM's token
// request comes on top when no token is kept, as for any request).
const ProbeRequests = 1

// backendStatus is GET /backends/{name}/status: state is whether the
// backend is operational (what qiskit-ibm-runtime reads as operational),
// status its condition in a word ("active", "paused", ...), length_queue
// the jobs waiting for it (qiskit's pending_jobs).
type backendStatus struct {
	State       *bool  `json:"state"`
	Status      string `json:"status"`
	LengthQueue *int   `json:"length_queue"`
}

// stoppedWords are the status words of a backend that takes no job now.
var stoppedWords = map[string]string{"paused": "paused", "maintenance": "under maintenance", "offline": "offline"}

// ProbeLoad reads the job's quantum backend (jobproperties' backend) with
// ProbeRequests request, GET /backends/{name}/status: the job fits when
// the backend is operational and not paused, and PendingJobs is its queue
// (length_queue). A quantum backend has no CPUs, so they stay unknown; its
// qubit count is not read (that is GET /backends/{name}/configuration, a
// large document). A backend the service does not know is ErrInvalid.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, _ *backends.Array) (backends.Load, error) {
	p, err := parseProperties(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	if p.Backend == "" {
		return backends.Load{}, backends.Invalid("jobproperties", "backend is required to probe a quantum backend's queue, e.g. {\"backend\":\"ibm_torino\"}")
	}
	b.remember(p)
	path := "/backends/" + url.PathEscape(p.Backend) + "/status"
	body, err := b.readStatus(ctx, path)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return backends.Load{}, backends.Invalid("jobproperties", "backend %q: IBM Quantum has no such backend for this instance (GET %s: HTTP 404)", p.Backend, path)
	}
	if err != nil {
		return backends.Load{}, err
	}
	var st backendStatus
	if err := json.Unmarshal(body, &st); err != nil || st.State == nil {
		return backends.Load{}, backends.Transient(fmt.Errorf("GET %s: HTTP 200 with an answer that is not a backend status (%d bytes, %s)", path, len(body), httpx.NotShown))
	}
	load := backends.UnknownLoad(p.Backend)
	if st.LengthQueue != nil && *st.LengthQueue >= 0 {
		load.PendingJobs = *st.LengthQueue
	}
	if word, stopped := stoppedWords[strings.ToLower(st.Status)]; stopped {
		load.Fits, load.Why = false, "the quantum backend "+p.Backend+" is "+word
	} else if !*st.State {
		load.Fits, load.Why = false, "the quantum backend "+p.Backend+" is not operational"
	}
	return load, nil
}

// maxStatusBody bounds a backend status answer: a few fields, under 1 KB.
const maxStatusBody = 64 << 10

// readStatus sends the one GET and reads at most maxStatusBody bytes of its
// answer; a longer one is not a backend status.
func (b *Backend) readStatus(ctx context.Context, path string) ([]byte, error) {
	resp, err := b.open(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	body, err := httpx.ReadAll(ctx, "GET "+path, resp, maxStatusBody+1)
	if err == nil && len(body) > maxStatusBody {
		err = backends.Transient(fmt.Errorf("GET %s: HTTP 200 with an answer over %d KiB, which no backend status is (%s)", path, maxStatusBody>>10, httpx.NotShown))
	}
	return body, err
}
