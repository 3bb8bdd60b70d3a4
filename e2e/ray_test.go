package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// rayJob is what the suite reads of a Ray job (GET /api/jobs/{submission_id}).
type rayJob struct {
	SubmissionID string `json:"submission_id"`
	Status       string `json:"status"`
	Message      string `json:"message"`
}

// rayGet reads path of the e2e Ray's Jobs API into out.
func (e *env) rayGet(t *testing.T, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.rayURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.rayToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ray: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ray GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("ray GET %s: %v: %s", path, err, body)
	}
}

// rayJob returns the Ray job with the given submission id.
func (e *env) rayJob(t *testing.T, id string) rayJob {
	t.Helper()
	var j rayJob
	e.rayGet(t, "/api/jobs/"+url.PathEscape(id), &j)
	return j
}

// rayLogs returns the driver's output of the Ray job id.
func (e *env) rayLogs(t *testing.T, id string) string {
	t.Helper()
	var l struct {
		Logs string `json:"logs"`
	}
	e.rayGet(t, "/api/jobs/"+url.PathEscape(id)+"/logs", &l)
	return l.Logs
}
