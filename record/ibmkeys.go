package record

import (
	"maps"
	"sort"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// IBM's Bridge Operator spells some record keys differently from us, and
// not consistently: its operator writes updateInterval, its LSF pod reads
// updateinterval; one of its samples writes jobProperties; its BridgeJob
// resource names the fields jobdata.jobscript, s3storage.endpoint, ... A
// migrating user's records carry any of these. Each is read as our key, so
// a record written for IBM's pods runs unchanged.

// ibmKeyAliases maps an IBM spelling to our key: the ibm tags of Spec
// (jobProperties from samples/test/slurm, updateinterval from the LSF
// samples and pod and the BridgeJob field, the BridgeJob's lower-case
// jobdata.* and its s3storage.*).
var ibmKeyAliases = func() map[string]string {
	m := map[string]string{}
	for _, f := range Fields {
		for _, ibm := range f.IBM {
			m[ibm] = f.Key
		}
	}
	return m
}()

// ibmInertKeys are keys IBM's operator, pods or samples put into the record
// that mean nothing to bridge-runner: accepted, and named once in the log.
var ibmInertKeys = map[string]string{
	"imagepullpolicy": "the pod's image pull policy is set on the pod, not in the record",
	"image":           "the pod's image is set on the pod, not in the record",
	"history":         "IBM's LSF pod's job history",
}

// ibmStateKeys are the unprefixed state keys IBM's LSF and Slurm pods (and
// the operator's failCR) write. bridge-runner writes them too in IBM status
// mode (see ibmcompat.go) and never reads them.
var ibmStateKeys = []string{"jobStatus", "submitTime", "startTime", "endTime", "message"}

// IBMKeys returns IBM's spellings of our keys (IBM's to ours) and IBM's keys
// that mean nothing here, for the documentation's tests.
func IBMKeys() (aliases map[string]string, inert []string) {
	aliases = maps.Clone(ibmKeyAliases)
	for k := range ibmInertKeys {
		inert = append(inert, k)
	}
	sort.Strings(inert)
	return aliases, inert
}

// dataValue returns the value of our key in d, falling back to its IBM
// spellings. When both are set they must agree (checkKeys says so).
func dataValue(d map[string]string, key string) string {
	if v := d[key]; v != "" {
		return v
	}
	for _, ibm := range aliasesOf(key) {
		if v := d[ibm]; v != "" {
			return v
		}
	}
	return ""
}

func aliasesOf(key string) []string {
	var out []string
	for ibm, ours := range ibmKeyAliases {
		if ours == key {
			out = append(out, ibm)
		}
	}
	sort.Strings(out)
	return out
}

// KeyReport says what checkKeys found besides errors.
type KeyReport struct {
	Aliased []string // IBM spellings read as our keys, "ibm=ours"
	Inert   []string // IBM keys that mean nothing here
}

// CheckKeys refuses a record with a key that is neither ours nor IBM's (a
// typo must not be silently dropped), naming the nearest known key, and one
// that gives a value twice (ours and an IBM spelling) with different
// values. Keys under status. are state and always accepted.
func CheckKeys(d map[string]string) (KeyReport, error) {
	var rep KeyReport
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case isOurKey(k):
		case ibmKeyAliases[k] != "":
			ours := ibmKeyAliases[k]
			if d[ours] != "" && d[k] != "" && strings.TrimSpace(d[ours]) != strings.TrimSpace(d[k]) {
				return rep, backends.Invalid(k, "and %s are the same setting (%s is IBM's spelling) with different values; keep one", ours, k)
			}
			rep.Aliased = append(rep.Aliased, k+"="+ours)
		case ibmInertKeys[k] != "":
			rep.Inert = append(rep.Inert, k)
		default:
			return rep, backends.Invalid(k, "is not a key bridge-runner or IBM's Bridge Operator knows; did you mean %s? (a misspelt key would be ignored, so it is refused)", nearestKey(k))
		}
	}
	return rep, nil
}

func isOurKey(k string) bool {
	if _, ok := FieldByKey(k); ok {
		return true
	}
	if strings.HasPrefix(k, "status.") || k == KeyID || k == KeyKill {
		return true
	}
	for _, s := range ibmStateKeys {
		if k == s {
			return true
		}
	}
	return false
}

// nearestKey is the description key closest to k in edit distance,
// ignoring case.
func nearestKey(k string) string {
	cands := make([]string, 0, len(Fields)+len(ibmKeyAliases)+2)
	for _, f := range Fields {
		cands = append(cands, f.Key)
	}
	for ibm := range ibmKeyAliases {
		cands = append(cands, ibm)
	}
	cands = append(cands, KeyKill, KeyID)
	sort.Strings(cands)
	best, bestD := "", -1
	for _, c := range cands {
		if d := editDistance(strings.ToLower(k), strings.ToLower(c)); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if ours := ibmKeyAliases[best]; ours != "" {
		return ours
	}
	return best
}

// editDistance is Levenshtein's distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
