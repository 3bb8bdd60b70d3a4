package quantum

import (
	"fmt"
	"time"
)

// DefaultAPIVersion is sent as IBM-API-Version when jobproperties do not pin
// one: the only version IBM's GET /v1/versions listed as live on 2026-11-25
// (the one qiskit-ibm-runtime sends). Its wire shape is the one this backend
// reads: no GET /jobs/{id}/transpiled_circuits (dropped 2026-02-01), no bss
// or usage.* in /jobs and /jobs/{id}/metrics (removed 2026-03-15), and
// circuits_execution_time_ns at the root of /metrics (2026-04-15). Of
// /metrics the backend reads only timestamps, which every version has.
const DefaultAPIVersion = "2026-04-15"

// SunsetWarning is how long before a pinned version's sunset the backend
// starts warning about it.
const SunsetWarning = 90 * 24 * time.Hour

// apiSunsets are the deprecated versions IBM's GET /v1/versions listed on
// 2026-11-25, with their sunset dates (after which the service refuses
// them). Source: /work/shared/reference/current-apis.md, "Checked again
// 2026-11-25"; backend-apis.md §4.1 for the header itself.
var apiSunsets = map[string]string{
	"2025-05-01": "2027-01-01",
	"2026-02-01": "2027-02-01",
	"2026-02-15": "2027-02-15",
	"2026-03-15": "2027-03-15",
}

// versionWarning is what to tell a user who pinned version v (jobproperties'
// api_version) at now, or "" when there is nothing to say: the version's
// sunset is past or within SunsetWarning, or it is older than the live one
// and was not among the versions IBM accepted on 2026-11-25. It never fails
// the job: the service itself decides what it accepts.
func versionWarning(v string, now time.Time) string {
	if v == "" || v >= DefaultAPIVersion {
		return ""
	}
	fix := "remove api_version from jobproperties to use " + DefaultAPIVersion
	sunset, known := apiSunsets[v]
	if !known {
		return fmt.Sprintf("IBM-API-Version %s (jobproperties' api_version) was not among the versions IBM Quantum accepted on 2026-11-25; the service may refuse it: %s", v, fix)
	}
	end, _ := time.Parse(time.DateOnly, sunset)
	switch left := end.Sub(now); {
	case left <= 0:
		return fmt.Sprintf("IBM-API-Version %s (jobproperties' api_version) passed its sunset on %s; the service may refuse it: %s", v, sunset, fix)
	case left <= SunsetWarning:
		return fmt.Sprintf("IBM-API-Version %s (jobproperties' api_version) is deprecated and reaches its sunset on %s (in %d days): %s", v, sunset, int(left.Hours()/24)+1, fix)
	}
	return ""
}
