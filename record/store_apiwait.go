package record

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bridge-runner/bridge-runner/backends"
)

// DefaultHeartbeat is how often a ConfigMap store says again that it is
// still waiting for the API server.
const DefaultHeartbeat = 30 * time.Second

// apiWait is what a ConfigMap store knows of a wait for its API server:
// since when its requests go unanswered, and when it last said so.
type apiWait struct {
	mu          sync.Mutex
	since, said time.Time
}

// heard notes the outcome of one request to the API server and says when
// a wait for it begins (with what the caller's retries wait until: ctx's
// deadline is the retry budget's end), goes on (every Heartbeat) and ends.
// A person whose KUBECONFIG names a cluster that is down sees why nothing
// happens, at once, instead of minutes of silence.
func (s *ConfigMapStore) heard(ctx context.Context, err error) {
	if s.Log == nil {
		return
	}
	s.wait.mu.Lock()
	defer s.wait.mu.Unlock()
	now := time.Now()
	if err == nil || !errors.Is(KubeErr(err), backends.ErrTransient) {
		if !s.wait.since.IsZero() {
			s.Log.Info("the Kubernetes API server answers again", "server", s.Server, "waited", now.Sub(s.wait.since).Round(time.Second))
		}
		s.wait.since = time.Time{}
		return
	}
	until := "until the step is stopped"
	if d, ok := ctx.Deadline(); ok {
		until = d.UTC().Format(time.RFC3339)
	}
	every := s.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	switch {
	case s.wait.since.IsZero():
		s.wait.since, s.wait.said = now, now
		s.Log.Warn("the Kubernetes API server does not answer; retrying", "server", s.Server, "record", s.Describe(),
			"cause", apiCause(err), "until", until)
	case now.Sub(s.wait.said) >= every:
		s.wait.said = now
		s.Log.Warn("still waiting for the Kubernetes API server", "server", s.Server, "cause", apiCause(err),
			"waited", now.Sub(s.wait.since).Round(time.Second), "until", until)
	}
}

// kubeErr is KubeErr, with a connection that failed named by the API
// server it was for and by its cause in a few words, not Go's
// `Get "https://...": dial tcp ...` chain.
func (s *ConfigMapStore) kubeErr(err error) error {
	e := KubeErr(err)
	var f *Fault
	if !errors.Is(e, backends.ErrTransient) || errors.As(e, &f) || !isNetErr(err) {
		return e
	}
	return backends.Transient(&unreachableError{server: s.Server, err: err})
}

// unreachableError is a request that reached no API server.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	server := "the Kubernetes API server"
	if e.server != "" {
		server += " " + e.server
	}
	return server + " cannot be reached: " + apiCause(e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// apiCause says in a few words why a request to the API server failed.
func apiCause(err error) string {
	var dns *net.DNSError
	var st apierrors.APIStatus
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (nothing listens at that address)"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.As(err, &st):
		return fmt.Sprintf("HTTP %d %s", st.Status().Code, st.Status().Reason)
	}
	return "network error"
}
