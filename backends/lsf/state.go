package lsf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// jobInfo reads GET ws/jobs/{id}; nil, nil when Application Center no
// longer lists the job. For an array's id, the entry is its first element
// (the array's directory and output file are its elements').
func (b *Backend) jobInfo(ctx context.Context, id string) (node, error) {
	entries, err := b.jobEntriesOf(ctx, id)
	if errors.Is(err, backends.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e := pickEntry(entries, id); e != nil {
		return e, nil
	}
	for _, e := range entries {
		if base, n := element(e); base == id && n > 0 {
			return e, nil
		}
	}
	return nil, nil
}

// pickEntry is the entry of the job id: the one of that id, or a lone
// entry without one.
func pickEntry(entries []node, id string) node {
	for _, e := range entries {
		if entryID(e) == id {
			return e
		}
	}
	if len(entries) == 1 && entryID(entries[0]) == "" {
		return entries[0]
	}
	return nil
}

// Status reads the job, falling back to its history once it has left
// mbatchd. An array's id gives its elements folded (foldElements).
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	if !validID(id) {
		return backends.Status{}, fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	entries, err := b.jobEntriesOf(ctx, id)
	if errors.Is(err, backends.ErrNotFound) {
		return b.history(ctx, id)
	}
	if err != nil {
		return backends.Status{}, err
	}
	if e := pickEntry(entries, id); e != nil {
		return mapJob(e)
	}
	if tasks, err := elements(entries, id); err != nil || len(tasks) > 0 {
		return foldElements(tasks), err
	}
	return b.history(ctx, id)
}

var (
	exitCodeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)exit(?:ed with exit)? code (\d+)`) })
	killRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<KILL>|(?i)signal <?KILL>?`) })
)

// history reads GET ws/jobhistory?ids={id} (bhist's text).
func (b *Backend) history(ctx context.Context, id string) (backends.Status, error) {
	r := request{method: http.MethodGet, path: "/ws/jobhistory", query: url.Values{"ids": {id}}, accept: "application/xml, application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return backends.Status{}, fmt.Errorf("LSF job %s: neither the job list nor the job history knows it: %w", id, backends.ErrNotFound)
	}
	if err != nil {
		return backends.Status{}, transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return backends.Status{}, fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	if inner := firstMap(get(doc, "jobHistory")); inner != nil {
		doc = inner
	}
	var texts []string
	hv := get(doc, "history")
	if s := str(hv); s != "" {
		texts = append(texts, s)
	}
	if l, ok := hv.([]any); ok {
		for _, x := range l {
			if s := str(x); s != "" {
				texts = append(texts, s)
			}
		}
	}
	for _, h := range list(hv) {
		if s := str(get(h, "content")); s != "" {
			texts = append(texts, s)
		}
	}
	if len(texts) == 0 {
		return backends.Status{}, fmt.Errorf("LSF job %s: not in the job list, and its history is empty: %w", id, backends.ErrNotFound)
	}
	text := strings.Join(texts, "\n")
	st := backends.Status{Reason: "history"}
	if m := exitCodeRE().FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		st.ExitCode = &n
	}
	switch {
	case strings.Contains(text, "Done successfully"):
		st.State, st.Raw, st.Message = backends.Done, "DONE", "done successfully (from the job history)"
		if st.ExitCode == nil {
			z := 0
			st.ExitCode = &z
		}
	case strings.Contains(text, "Completed <exit>") || strings.Contains(text, "Exited"):
		st.Raw = "EXIT"
		if killRE().MatchString(text) {
			st.State, st.Message = backends.Killed, "killed (from the job history)"
		} else {
			st.State, st.Message = backends.Failed, "exited (from the job history)"
			if st.ExitCode != nil {
				st.Message = fmt.Sprintf("exited with code %d (from the job history)", *st.ExitCode)
			}
		}
	default:
		st.State, st.Raw = backends.Unknown, "UNKNOWN"
		st.Message = "the job has left LSF's job list and its history shows no end"
	}
	return st, nil
}

// Killing exit reasons (LSF TERM_* names and numbers from lsbatch.h).
var killedInfo = map[string]bool{
	"TERM_OWNER": true, "TERM_ADMIN": true, "TERM_FORCE_OWNER": true, "TERM_FORCE_ADMIN": true,
	"TERM_REQUEUE_OWNER": true, "TERM_REQUEUE_ADMIN": true,
	"8": true, "9": true, "10": true, "11": true, "14": true, "15": true,
}

// lsfCategories are the exit reasons (TERM_* names and numbers from
// lsbatch.h) that are not the job's own failure: LSF took the host or the
// slot away (preemption, a closed run window, host load, a hung or zombie
// job removed after its host stopped answering, a reclaimed cloud host),
// or a time limit ran out. Memory, process and thread limits stay the
// job's: it exceeded what it asked for.
var lsfCategories = map[string]backends.Category{
	"TERM_PREEMPT": backends.CategoryInfrastructure, "1": backends.CategoryInfrastructure,
	"TERM_WINDOW": backends.CategoryInfrastructure, "2": backends.CategoryInfrastructure,
	"TERM_LOAD": backends.CategoryInfrastructure, "3": backends.CategoryInfrastructure,
	"TERM_ZOMBIE": backends.CategoryInfrastructure, "19": backends.CategoryInfrastructure,
	"TERM_REMOVE_HUNG_JOB": backends.CategoryInfrastructure, "26": backends.CategoryInfrastructure,
	"TERM_RC_RECLAIM": backends.CategoryInfrastructure, "31": backends.CategoryInfrastructure,
	"TERM_RUNLIMIT": backends.CategoryTimeout, "5": backends.CategoryTimeout,
	"TERM_DEADLINE": backends.CategoryTimeout, "6": backends.CategoryTimeout,
	"TERM_CPULIMIT": backends.CategoryTimeout, "12": backends.CategoryTimeout,
}

// mapJob maps one job element to a Status.
func mapJob(e node) (backends.Status, error) {
	raw := strings.ToUpper(str(get(e, "jobStatus", "status", "stat")))
	st := backends.Status{Raw: raw}
	st.SubmitTime = parseTime(get(e, "submitTimeGMT", "submitTime"))
	st.StartTime = parseTime(get(e, "startTimeGMT", "startTime"))
	st.EndTime = parseTime(get(e, "endTimeGMT", "endTime", "finishTime"))
	if n, ok := parseInt(get(e, "exitStatus", "exitCode")); ok {
		if n > 255 && n%256 == 0 {
			n >>= 8 // a wait status
		}
		st.ExitCode = &n
	}
	info := strings.ToUpper(str(get(e, "exitInfo", "exitReason", "termReason", "terminationReason")))
	switch raw {
	case "PEND", "WAIT", "PROV":
		st.State = backends.Pending
		st.Message = str(get(e, "pendReason", "pendingReason"))
		st.Reason = st.Message
	case "RUN":
		st.State = backends.Running
	case "PSUSP", "USUSP", "SSUSP":
		st.State = backends.Suspended
		st.Message = str(get(e, "suspendReason", "suspReason", "pendReason"))
	case "DONE":
		st.State, st.Message = backends.Done, "done"
		if st.ExitCode == nil {
			z := 0
			st.ExitCode = &z
		}
	case "EXIT":
		st.Reason = info
		switch {
		case killedInfo[info]:
			st.State, st.Message = backends.Killed, "killed ("+info+")"
		case info == "" && st.ExitCode != nil && *st.ExitCode == 130:
			st.State, st.Message = backends.Killed, "killed (exit code 130: SIGINT, as bkill sends)"
		default:
			st.State, st.Category = backends.Failed, lsfCategories[info]
			st.Message = "exited"
			if st.ExitCode != nil {
				st.Message = fmt.Sprintf("exited with code %d", *st.ExitCode)
				if st.Reason == "" {
					st.Reason = "NonZeroExitCode"
				}
			}
			if info != "" {
				st.Message += " (" + info + ")"
			}
		}
	case "ZOMBI":
		st.State, st.Message = backends.Killed, "killed while its execution host was unreachable (ZOMBI)"
	case "UNKWN":
		st.State, st.Message = backends.Unknown, "mbatchd lost contact with the job's sbatchd (UNKWN)"
	case "":
		return st, errors.New("Application Center answered a job without a jobStatus")
	default:
		return st, fmt.Errorf("unknown LSF job status %q", raw)
	}
	return st, nil
}

var timeLayouts = []string{
	time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006/01/02 15:04:05",
	"Mon Jan _2 15:04:05 2006", "Jan _2 15:04:05 2006", "Mon Jan _2 15:04:05 MST 2006",
}

// parseTime reads LSF times in the forms seen in the wild; zero if none fits.
func parseTime(v any) time.Time {
	s := str(v)
	if s == "" || s == "-" || s == "0" {
		return time.Time{}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		if n > 1e12 {
			return time.UnixMilli(n).UTC()
		}
		return time.Unix(n, 0).UTC()
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
