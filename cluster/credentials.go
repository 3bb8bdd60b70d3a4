package cluster

import (
	"sort"
	"strings"
)

// MaxCredentialFileBytes caps a credential value: a token, key or password
// is short, and reading a huge file whole (a wrong mount) would cost the
// pod its memory for nothing. A larger value is no credential: it is left
// out of the identity as it cannot be read as one.
const MaxCredentialFileBytes = 64 << 10

// CredentialText is the text a cluster's identity is derived from
// (Spec.CredentialText), of a credentials directory's files by name: every
// name but the mount's own dot-entries and values over
// MaxCredentialFileBytes, sorted, as "name\0trimmed value\0". Steps and the
// agent read it from their mounted Secret, the operator from the Secret's
// data; the one encoding is why the three derive the same key.
func CredentialText(files map[string][]byte) []byte {
	names := make([]string, 0, len(files))
	for n, v := range files {
		if !strings.HasPrefix(n, ".") && len(v) <= MaxCredentialFileBytes {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		b = append(append(append(b, n...), 0), strings.TrimSpace(string(files[n]))...)
		b = append(b, 0)
	}
	return b
}
