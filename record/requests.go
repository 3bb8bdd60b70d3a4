package record

import (
	"sort"
	"strconv"
	"strings"
)

// KeyBackendRequests counts the HTTP requests invoke sent to the backend
// for this record, by the class of their answer: "2xx=12 4xx=1 error=2"
// (classes 1xx to 5xx, and error for no answer). Every invoke of the
// record adds its own to what it found, so the counts only grow while the
// record lives; a new run starts them again. They ride along with writes
// the state makes anyway (never a write of their own), so the operator
// (the only reader) sees them at each state change and at the end.
const KeyBackendRequests = "status.backendRequests"

// RequestClasses are the classes KeyBackendRequests counts, in order.
var RequestClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"}

// FormatRequests writes counts by class as KeyBackendRequests holds them;
// classes with no request are left out ("" when there are none).
func FormatRequests(counts map[string]int64) string {
	var b strings.Builder
	for _, c := range RequestClasses {
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
	i := sort.SearchStrings(RequestClasses, c)
	return i < len(RequestClasses) && RequestClasses[i] == c
}

// RequestClass is the class of an HTTP answer's status code.
func RequestClass(code int) string {
	if code < 100 || code > 599 {
		return "error"
	}
	return strconv.Itoa(code/100) + "xx"
}
