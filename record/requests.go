package record

import (
	"slices"
	"strconv"
	"strings"
)

// KeyBackendRequests counts the HTTP requests invoke sent to the backend
// for this record, by the class of their answer: "2xx=12 4xx=1 error=2"
// (classes 1xx to 5xx, and error for no answer), and the commands and
// transfers a backend reached over SSH sent, by kind (CommandClasses). Every invoke of the
// record adds its own to what it found, so the counts only grow while the
// record lives; a new run starts them again. They ride along with writes
// the state makes anyway (never a write of their own), so the operator
// (the only reader) sees them at each state change and at the end.
const KeyBackendRequests = "status.backendRequests"

// RequestClasses are the classes of HTTP answers KeyBackendRequests
// counts, in order.
var RequestClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"}

// CommandClasses are the classes of what a backend reached over SSH sent
// (backends.CommandCounts' kinds, "ssh-" before them), sorted: "ssh-status=40
// ssh-submit=1" beside an HTTP backend's "2xx=41".
var CommandClasses = []string{"ssh-cancel", "ssh-error", "ssh-log", "ssh-other", "ssh-probe", "ssh-stage", "ssh-status", "ssh-submit"}

// CommandClass is the class of a backends.CommandCounts kind.
func CommandClass(kind string) string { return "ssh-" + kind }

// FormatRequests writes counts by class as KeyBackendRequests holds them;
// classes with no request are left out ("" when there are none).
func FormatRequests(counts map[string]int64) string {
	var b strings.Builder
	for _, c := range append(slices.Clone(RequestClasses), CommandClasses...) {
		if n := counts[c]; n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c + "=" + strconv.FormatInt(n, 10))
		}
	}
	return b.String()
}

// ParseRequests reads KeyBackendRequests. A record is user-editable: a
// class it does not know, or a count that is not a positive number, is
// skipped rather than trusted.
func ParseRequests(s string) map[string]int64 {
	out := map[string]int64{}
	for _, f := range strings.Fields(s) {
		c, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n <= 0 || !knownClass(c) {
			continue
		}
		out[c] = n
	}
	return out
}

func knownClass(c string) bool {
	_, http := slices.BinarySearch(RequestClasses, c)
	_, ssh := slices.BinarySearch(CommandClasses, c)
	return http || ssh
}

// RequestClass is the class of an HTTP answer's status code.
func RequestClass(code int) string {
	if code < 100 || code > 599 {
		return "error"
	}
	return strconv.Itoa(code/100) + "xx"
}
