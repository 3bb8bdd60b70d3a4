package record

import (
	"strings"
	"testing"
)

// A ConfigMap's name is its LabelFollow value when it is a valid label
// value; a longer one (a name may have 253 characters, a label value 63)
// gets a digest that is one, and two such names do not share it.
func TestFollowValueIsALabelValue(t *testing.T) {
	if got := FollowValue("job-1-bridge-cm"); got != "job-1-bridge-cm" {
		t.Errorf("a short name is its own value, got %q", got)
	}
	long := strings.Repeat("a", 60) + "-bridge-cm"
	v := FollowValue(long)
	if len(v) > 63 || CheckCluster(v) != nil {
		t.Errorf("the value of a long name is no label value: %q", v)
	}
	if v == FollowValue(strings.Repeat("b", 60)+"-bridge-cm") {
		t.Errorf("two long names share the value %q", v)
	}
}
