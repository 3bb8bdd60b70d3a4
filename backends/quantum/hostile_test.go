package quantum

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

// quantumShapes are the service's and IAM's documented error shapes.
var quantumShapes = map[string]func(string) (string, string){
	"errors": func(r string) (string, string) {
		q := testutil.JSONString(r)
		return "application/json", `{"errors":[{"code":` + q + `,"message":` + q + `,"solution":` + q + `,"more_info":` + q + `}],"trace":` + q + `}`
	},
	"iam": func(r string) (string, string) {
		q := testutil.JSONString(r)
		return "application/json", `{"errorCode":` + q + `,"errorMessage":` + q + `,"context":{"requestId":` + q + `}}`
	},
	"not the shape": func(r string) (string, string) {
		return "application/json", `{"message":` + testutil.JSONString(r) + `,"detail":` + testutil.JSONString(r) + `}`
	},
}

// TestHostileBodiesStayOutOfMessages: IAM or the service echoing the API
// key, in any encoding, puts none of it into the error. Before, a text
// body was copied (clipped at 300 bytes, and at 200 with %.200s for a
// submit answer without an id), and message, solution, detail and trace
// were copied as the server wrote them.
func TestHostileBodiesStayOutOfMessages(t *testing.T) {
	f := fakequantum.New(t)
	f.APIKey = hostileSecret
	rd := testutil.NewRedirector(t, f.URL, true)
	creds := testutil.NewCreds(map[string]string{"crn": f.CRN, "apikey": hostileSecret, "iam_url": rd.Front.URL + "/identity/token"})
	newBE := func() *Backend {
		be, err := New(backends.Config{URL: rd.Front.URL + "/api/v1", HTTPClient: rd.Front.Client(), Credentials: creds})
		require.NoError(t, err)
		return be.(*Backend)
	}
	id, err := newBE().Submit(ctx, samplerJob())
	require.NoError(t, err)
	paths := map[string]string{"iam": "/identity/token", "submit": "/api/v1/jobs", "status": "/api/v1/jobs/" + id,
		"statusMany": "/api/v1/jobs"}
	seen := 0
	for _, hb := range testutil.HostileBodies(hostileSecret, quantumShapes) {
		for _, status := range []int{200, 400, 401, 404, 429, 500} {
			for name, path := range paths {
				rd.Answer(func(r *http.Request) bool { return r.URL.Path == path }, status, hb.ContentType, hb.Body)
				be := newBE()
				var err error
				switch name {
				case "status":
					_, err = be.Status(ctx, id)
				case "statusMany":
					_, err = be.StatusMany(ctx, []string{id, "cnosuchjob0000000000"})
				default:
					_, err = be.Submit(ctx, samplerJob())
				}
				if err == nil {
					continue
				}
				assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", hb.Name, name, status, err)
				seen++
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d failed answers, no leak", seen)
}

func TestFailedAnswerWording(t *testing.T) {
	f := fakequantum.New(t)
	rd := testutil.NewRedirector(t, f.URL, true)
	be, err := New(backends.Config{URL: rd.Front.URL + "/api/v1", HTTPClient: rd.Front.Client(),
		Credentials: testutil.NewCreds(map[string]string{"crn": f.CRN, "apikey": f.APIKey, "iam_url": rd.Front.URL + "/identity/token"})})
	require.NoError(t, err)
	rd.Answer(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/v1/jobs") }, http.StatusOK, "application/json", `{"no":"id"}`)
	_, err = be.Submit(ctx, samplerJob())
	require.Error(t, err)
	assert.Equal(t, "POST /jobs: HTTP 200 without a job id (body not in the documented error shape, not shown)", err.Error())
}
