package backends

import "testing"

// TestFailureCategoryDefaults: a backend's own category wins where it fits
// the state; FAILED defaults to the job's doing and KILLED to cancelled;
// other states have none, whatever a backend put there.
func TestFailureCategoryDefaults(t *testing.T) {
	cases := []struct {
		st   State
		cat  Category
		want Category
	}{
		{Failed, "", CategoryJob},
		{Failed, CategoryInfrastructure, CategoryInfrastructure},
		{Failed, CategoryTimeout, CategoryTimeout},
		{Failed, CategoryCancelled, CategoryJob},
		{Killed, "", CategoryCancelled},
		{Killed, CategoryJob, CategoryCancelled},
		{Killed, CategoryInfrastructure, CategoryInfrastructure},
		{Done, CategoryInfrastructure, ""},
		{Pending, CategoryInfrastructure, ""},
		{Unknown, CategoryJob, ""},
	}
	for _, c := range cases {
		if got := (Status{State: c.st, Category: c.cat}).FailureCategory(); got != c.want {
			t.Errorf("%s with %q: %q, want %q", c.st, c.cat, got, c.want)
		}
	}
}
