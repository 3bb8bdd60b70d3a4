package htcondor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// jobAd is the part of a job's ClassAd that is read, from condor_q or
// condor_history -json.
type jobAd struct {
	ClusterID            int64  `json:"ClusterId"`
	ProcID               int64  `json:"ProcId"`
	JobStatus            int    `json:"JobStatus"`
	HoldReason           string `json:"HoldReason"`
	HoldReasonCode       *int   `json:"HoldReasonCode"`
	HoldReasonSubCode    *int   `json:"HoldReasonSubCode"`
	RemoveReason         string `json:"RemoveReason"`
	LastRejMatchReason   string `json:"LastRejMatchReason"` // the negotiator's last word on an idle job
	LastRejMatchTime     int64  `json:"LastRejMatchTime"`
	LastMatchTime        int64  `json:"LastMatchTime"`
	ExitCode             *int   `json:"ExitCode"`
	ExitBySignal         bool   `json:"ExitBySignal"`
	ExitSignal           *int   `json:"ExitSignal"`
	QDate                int64  `json:"QDate"`
	JobStartDate         int64  `json:"JobStartDate"`
	JobCurrentStartDate  int64  `json:"JobCurrentStartDate"`
	CompletionDate       int64  `json:"CompletionDate"`
	EnteredCurrentStatus int64  `json:"EnteredCurrentStatus"`
	Iwd                  string `json:"Iwd"`
	Key                  string `json:"BridgeRunnerKey"`
	TaskIndex            *int   `json:"BridgeTaskIndex"` // set on an array's tasks
	TaskCount            *int   `json:"BridgeTaskCount"`
	adUsage
}

// adAttributes are the attributes asked for (condor_q -attributes).
const adAttributes = "ClusterId,ProcId,JobStatus,HoldReason,HoldReasonCode,HoldReasonSubCode,RemoveReason,LastRejMatchReason,LastRejMatchTime,LastMatchTime,ExitCode,ExitBySignal,ExitSignal," +
	"QDate,JobStartDate,JobCurrentStartDate,CompletionDate,EnteredCurrentStatus,Iwd," + keyAttr + "," + taskAttr + "," + countAttr + "," + usageAttributes

func (a *jobAd) id() string {
	return strconv.FormatInt(a.ClusterID, 10) + "." + strconv.FormatInt(a.ProcID, 10)
}

// JobStatus values.
var statusNames = map[int]string{
	1: "IDLE", 2: "RUNNING", 3: "REMOVED", 4: "COMPLETED", 5: "HELD", 6: "TRANSFERRING_OUTPUT", 7: "SUSPENDED",
}

// Hold reason codes a person chose (1: condor_hold, 15: submitted on hold):
// the job waits for condor_release, so it stays SUSPENDED. Every other hold
// is HTCondor giving up on the job (it could not start the executable,
// transfer a file, or a policy expression fired): FAILED, with the reason.
var userHolds = map[int]bool{1: true, 15: true}

// holdCategories are the hold reason codes (HTCondor's HoldReasonCode
// table) that are not the job's own doing. Infrastructure: the pool failed
// the job (11 and 18 file transfer protocol, 17 JobShadowMismatch, 19 and
// 48 a prepare-job hook, 21 StartdHeldJob, 23 FailedToAccessUserAccount,
// 24 NoCompatibleShadow, 28-31 sandbox ownership, 49
// CannotSwitchPrimaryGroup (new since 23.9: the execute node could not give
// the job its user's group, as 23 its account),
// 36 FailedToCheckpoint, 38-42 the cloud's own errors, 45
// SingularityTestFailed on the execute node). Timeout: 46
// JobDurationExceeded and 47 JobExecuteExceeded. Every other code (the
// executable, input or output files, the job's own policy, resources it
// outgrew) is the job's, and so is 26 SystemPolicy: pools use
// SYSTEM_PERIODIC_HOLD mostly for jobs that outgrow their memory request,
// which a retry would not mend. An evicted job is not held: it goes back to IDLE
// and runs again, so it is PENDING, not a failure at all.
var holdCategories = map[int]backends.Category{
	11: backends.CategoryInfrastructure, 17: backends.CategoryInfrastructure, 18: backends.CategoryInfrastructure,
	19: backends.CategoryInfrastructure, 21: backends.CategoryInfrastructure, 23: backends.CategoryInfrastructure,
	24: backends.CategoryInfrastructure,
	28: backends.CategoryInfrastructure, 29: backends.CategoryInfrastructure, 30: backends.CategoryInfrastructure,
	31: backends.CategoryInfrastructure, 36: backends.CategoryInfrastructure, 38: backends.CategoryInfrastructure,
	39: backends.CategoryInfrastructure, 40: backends.CategoryInfrastructure, 41: backends.CategoryInfrastructure,
	42: backends.CategoryInfrastructure, 45: backends.CategoryInfrastructure, 48: backends.CategoryInfrastructure,
	49: backends.CategoryInfrastructure,
	46: backends.CategoryTimeout, 47: backends.CategoryTimeout,
}

// reviewedHoldCodes is the highest HoldReasonCode whose category above was
// decided (HTCondor 25.14's table ends at 49); a test reads each real
// pool's table and fails on a newer code, which needs deciding here.
const reviewedHoldCodes = 49

// status maps the ad onto the contract's states.
func (a *jobAd) status() backends.Status {
	raw, ok := statusNames[a.JobStatus]
	if !ok {
		raw = "JobStatus " + strconv.Itoa(a.JobStatus)
	}
	st := backends.Status{Raw: raw, SubmitTime: epoch(a.QDate)}
	msg := fmt.Sprintf("HTCondor job %s is %s", a.id(), raw)
	switch a.JobStatus {
	case 1:
		st.State = backends.Pending
		msg += a.unmatched(&st)
	case 2, 6:
		st.State = backends.Running
	case 7:
		st.State = backends.Suspended
	case 3:
		st.State, st.Reason = backends.Killed, a.RemoveReason
		msg += reasonText(a.RemoveReason)
	case 4:
		msg += a.completed(&st)
	case 5:
		msg += a.held(&st)
	default:
		st.State = backends.Running // a state this package does not know: keep following
	}
	if st.State != backends.Pending {
		st.StartTime = epoch(a.JobStartDate) // the first start, also after an eviction
		if st.StartTime.IsZero() {
			st.StartTime = epoch(a.JobCurrentStartDate)
		}
	}
	if st.State.Final() {
		st.EndTime = epoch(a.CompletionDate)
		if st.EndTime.IsZero() {
			st.EndTime = epoch(a.EnteredCurrentStatus)
		}
	}
	st.Message = msg
	return st
}

// completed: DONE with exit code 0, FAILED otherwise.
func (a *jobAd) completed(st *backends.Status) string {
	st.State = backends.Done
	code, msg := 0, ""
	switch {
	case a.ExitBySignal && a.ExitSignal != nil:
		code = 128 + *a.ExitSignal
		msg = fmt.Sprintf(", killed by signal %d", *a.ExitSignal)
	case a.ExitCode != nil:
		code = *a.ExitCode
		msg = fmt.Sprintf(", exit code %d", code)
	}
	st.ExitCode = &code
	if code != 0 || a.ExitBySignal {
		st.State, st.Reason = backends.Failed, "NonZeroExitCode"
	}
	return msg
}

// maxMatchReason bounds the negotiator's text kept as a reason.
const maxMatchReason = 100

// unmatched gives an idle job the negotiator's reason for not matching it
// (LastRejMatchReason: "no match found" when no machine meets its
// requirements, "insufficient priority", ...), unless it was matched since:
// a job that can never start says why in the record, the step's log and
// status, as Slurm's pending reason does.
func (a *jobAd) unmatched(st *backends.Status) string {
	r := strings.TrimSpace(a.LastRejMatchReason)
	if r == "" || a.LastMatchTime > a.LastRejMatchTime {
		return ""
	}
	if len(r) > maxMatchReason {
		r = r[:maxMatchReason]
	}
	st.Reason = r
	return fmt.Sprintf(": not matched to a machine (%s); `condor_q -better-analyze %s` says which requirement no machine meets", r, a.id())
}

// held: FAILED for HTCondor's hold; for a person's, SUSPENDED once the job
// has run, and PENDING if it never started (as Slurm keeps a held job
// PENDING): it cannot start before condor_release, so it is a wait that the
// step's log reports and a pendingLimit ends.
func (a *jobAd) held(st *backends.Status) string {
	st.State = backends.Failed
	if a.HoldReasonCode != nil {
		st.Reason = "HoldReasonCode " + strconv.Itoa(*a.HoldReasonCode)
		if a.HoldReasonSubCode != nil && *a.HoldReasonSubCode != 0 {
			st.Reason += "." + strconv.Itoa(*a.HoldReasonSubCode)
		}
		if userHolds[*a.HoldReasonCode] {
			st.State = backends.Suspended
			if a.JobStartDate <= 0 && a.JobCurrentStartDate <= 0 {
				st.State = backends.Pending
			}
		}
		st.Category = holdCategories[*a.HoldReasonCode]
	}
	return reasonText(a.HoldReason)
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

func epoch(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// parseAds reads condor_q/condor_history -json output: a JSON array of ads,
// or nothing at all when no job matched.
func parseAds(out []byte) ([]*jobAd, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	var ads []*jobAd
	if err := json.Unmarshal(out, &ads); err != nil {
		return nil, fmt.Errorf("cannot read HTCondor's JSON (%d bytes, not shown): %w", len(out), err)
	}
	return ads, nil
}
