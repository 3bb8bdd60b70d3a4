package httpx_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

// TestReasonDropsEncodedValues: a documented error field that echoes a
// credential, in any of the forms the sweep found the scrubber missing,
// keeps its words and loses the value.
func TestReasonDropsEncodedValues(t *testing.T) {
	for _, f := range testutil.HostileForms(hostileSecret) {
		for _, reason := range []string{"invalid token " + f.Text + " for user bridge", f.Text} {
			got := httpx.Reason(reason)
			assert.Empty(t, testutil.Leaks(got, hostileSecret), "%s: %q", f.Name, got)
			if strings.HasPrefix(reason, "invalid") {
				assert.True(t, strings.HasPrefix(got, "invalid token …"), "%s: the words stay: %q", f.Name, got)
			}
		}
	}
}

// TestReasonDropsWordsBrokenByQuotes: a passphrase's words, each broken
// by doubled quotes (as CSV escapes them), are dropped; a word quoted whole
// is kept. Before, `Ta""nger""ine` passed as a word, and no scrubber
// recognizes it.
func TestReasonDropsWordsBrokenByQuotes(t *testing.T) {
	assert.Equal(t, `invalid passphrase … and "token" kept`, httpx.Reason(`invalid passphrase Ta""nger""ine ""wobb""ly o""f and "token" kept`))
}

func TestReasonKeepsWords(t *testing.T) {
	for in, want := range map[string]string{
		"Invalid job id specified":                                      "Invalid job id specified",
		"Unable to find JobId=999999":                                   "Unable to find JobId=999999",
		"Unable to find JobId=999999999999999999999":                    "Unable to find …",
		"Job not found. Job ID: c5dge2d3rn7breq27i9g":                   "Job not found. Job ID: …",
		"ValueError: Job with submission_id raysubmit_x already exists": "ValueError: Job with submission_id raysubmit_x already exists",
		"  slow   down ":                                                "slow down",
		"\x00p\x00w":                                                    "",
		"":                                                              "",
		"Provided API key could not be found.":                          "Provided API key could not be found.",
	} {
		assert.Equal(t, want, httpx.Reason(in), "%q", in)
	}
	long := httpx.Reason(strings.Repeat("word ", 100))
	assert.LessOrEqual(t, len(long), httpx.MaxReason+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"), "a clipped reason says so")
}

func TestFailure(t *testing.T) {
	assert.Equal(t, "HTTP 502 from slurmrestd (body not in the documented error shape, not shown)", httpx.Failure(502, "slurmrestd", "", ""))
	assert.Equal(t, "HTTP 500 from slurmrestd: Invalid job id specified; slurmctld's log says more",
		httpx.Failure(500, "slurmrestd", "Invalid job id specified", "slurmctld's log"))
}
