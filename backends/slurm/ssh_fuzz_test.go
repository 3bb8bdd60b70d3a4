package slurm

import "testing"

func FuzzParseScontrol(f *testing.F) {
	f.Add("JobId=7 JobName=a b JobState=COMPLETED Reason=None ExitCode=0:0 WorkDir=/w StdOut=/o SubmitTime=2026-11-23T18:01:06")
	f.Add("JobState=CANCELLED ExitCode=x:y")
	f.Fuzz(func(t *testing.T, out string) {
		st := scontrolStatus("1", parseScontrol(out))
		if !st.State.Valid() {
			t.Fatalf("state %q from %q", st.State, out)
		}
	})
}
