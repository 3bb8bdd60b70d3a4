package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// ProbeTimeout bounds one target's probe: a target that does not answer
// in time is skipped, so a dead cluster delays a placement by this much
// at most (the targets are probed at once).
const ProbeTimeout = 10 * time.Second

// placed returns the description of a job with targets, placed at the
// target its record names. A record without a placement is placed here
// when this run may submit (invoke), else (cleanup) it is an error: no
// placement means nothing was submitted, and nothing is guessed.
func (r *run) placed(ctx context.Context, desc *record.Description) (*record.Description, error) {
	p, err := record.ParsePlaced(r.rec.Data[record.KeyPlacement])
	if err != nil {
		return nil, err
	}
	if p != nil {
		return desc, desc.Place(*p)
	}
	if !r.placing {
		return nil, backends.Invalid("targets", "the record names no placement, so no target was chosen and nothing was submitted from it")
	}
	p, err = r.place(ctx, desc)
	if err != nil {
		return nil, err
	}
	return desc, desc.Place(*p)
}

// place probes every target at once, lets the job's policy choose, and
// records the choice with what each probe saw, before any submit intent:
// a re-attach, a cleanup and a second invoker of the record all use the
// target recorded first.
func (r *run) place(ctx context.Context, desc *record.Description) (*record.Placed, error) {
	var cands []candidate
	var choice int
	var shares []record.Share
	var err error
	if desc.Policy == record.PolicySpread {
		cands, choice, shares, err = r.chooseSpread(ctx, desc)
	} else {
		cands, choice, err = r.choose(ctx, desc)
	}
	if err != nil {
		return nil, err
	}
	p := &record.Placed{Target: cands[choice].target.Name, Backend: cands[choice].target.Backend, Policy: desc.Policy,
		At: time.Now().UTC().Truncate(time.Second), Shares: shares}
	for _, c := range cands {
		p.Probes = append(p.Probes, c.probe())
	}
	b, _ := json.Marshal(p)
	est := predictedStart(cands[choice], p.At)
	err = retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			if d[record.KeyPlacement] != "" || (r.Owner != "" && !mayClaim(d[record.KeyOwner], r.Owner)) {
				return false, nil // placed meanwhile, or another task's record (claim refuses it next)
			}
			d[record.KeyPlacement] = string(b)
			record.Set(d, record.KeyStartEstimate, est)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("recording the placement in %s: %w", r.Store.Describe(), err)
	}
	if won, _ := record.ParsePlaced(r.rec.Data[record.KeyPlacement]); won != nil {
		p = won // ours, or another invoker's of this record that placed it first
	}
	r.Log.Info("placed the job", "target", p.Target, "policy", p.Policy, "probes", placementSummary(p), "shares", sharesSummary(p.Shares))
	return p, nil
}

// maxChoices bounds how often a placement chooses again because the
// shared figures moved under it so that its choice no longer stands
// (stillChosen), each round costing a few Kubernetes requests; past the
// bound an invoke places on the figures it saw last, uncounted.
const maxChoices = 10

// choose probes the targets (or reads their shared probes) and lets the
// policy choose; where the chosen target's figures are shared, the job
// is counted into them, and if they moved meanwhile it chooses again on
// the new ones.
func (r *run) choose(ctx context.Context, desc *record.Description) ([]candidate, int, error) {
	for round := 1; ; round++ {
		cands := r.probeTargets(ctx, desc)
		trustEstimates(cands, time.Now())
		choice, err := choose(desc.Policy, cands)
		if err != nil {
			return nil, -1, err
		}
		sh := cands[choice].share
		if sh == nil || round >= maxChoices || sh.reserve(context.WithoutCancel(ctx), cands[choice].load, stillChosen(desc.Policy, cands, choice)) {
			return cands, choice, nil
		}
	}
}

// stillChosen says whether the policy still chooses cands[choice] once
// its shared figures are cur (others placed there meanwhile), the other
// targets as they were read: a burst's placements that moved a target's
// figures only change a choice they make worse than another's.
func stillChosen(policy string, cands []candidate, choice int) func(shareEntry) bool {
	return func(cur shareEntry) bool {
		now := withShared(cands, choice, cur)
		c := now[choice : choice+1]
		trustEstimates(c, time.Now()) // as the others' were, once
		again, err := choose(policy, now)
		return err == nil && again == choice
	}
}

// withShared is a copy of cands where cands[i]'s load is its shared
// figures e with every placement counted into them.
func withShared(cands []candidate, i int, e shareEntry) []candidate {
	now := append([]candidate(nil), cands...)
	now[i].load = e.withPlaced()
	return now
}

// candidate is one target and what its probe found.
type candidate struct {
	target record.Target
	load   backends.Load
	skip   string // why it cannot take the job now; "" if it can
	down   bool   // it did not answer (rather than refused the job)
	// absurdStart: the probe's start estimate was absurd and is cleared
	// (distrustAbsurd); shift is what correctByLearnt moved it by.
	absurdStart bool
	shift       time.Duration
	// share is the cluster's shared load (loadshare.go), nil without one;
	// shared: the load came from it rather than from a probe of ours.
	share  *loadShare
	shared bool
}

func (c candidate) probe() record.Probe {
	p := record.Probe{Target: c.target.Name, Queue: c.load.Queue, Skipped: c.skip, Shared: c.shared}
	if c.skip != "" && c.down {
		return p
	}
	known := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	p.FreeCPUs, p.TotalCPUs, p.PendingJobs = known(c.load.FreeCPUs), known(c.load.TotalCPUs), known(c.load.PendingJobs)
	p.RunningJobs, p.PendingCPUs = known(c.load.RunningJobs), known(c.load.PendingCPUs)
	if c.load.CPUSecondsKnown {
		ps, rs := c.load.PendingCPUSeconds, c.load.RunningCPUSeconds
		p.PendingCPUSeconds, p.RunningCPUSeconds = &ps, &rs
	}
	if t := c.schedulerStart(); !t.IsZero() {
		t = t.UTC()
		p.EstimatedStart = &t
	}
	return p
}

// probeTargets probes each target with its own backend, all at once.
func (r *run) probeTargets(ctx context.Context, desc *record.Description) []candidate {
	cands := make([]candidate, len(desc.Targets))
	var wg sync.WaitGroup
	for i, t := range desc.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cands[i] = r.probeTarget(ctx, desc, t)
		}()
	}
	wg.Wait()
	return cands
}

func (r *run) probeTarget(ctx context.Context, desc *record.Description, t record.Target) candidate {
	c := candidate{target: t, load: backends.UnknownLoad("")}
	if t.Backend == "" {
		name, _, err := record.SelectBackend(ctx, "", r.BackendChoice, t.ResourceURL, r.Registry.Names(), r.Backend.HTTPClient)
		if err != nil {
			c.skip, c.down = "no backend could be chosen for its resourceURL; give the target a backend", !record.Permanent(err)
			return c
		}
		c.target.Backend = name
	}
	d := *desc
	if err := d.Place(record.Placed{Target: t.Name, Backend: c.target.Backend}); err != nil {
		c.skip = err.Error()
		return c
	}
	c.share = r.newLoadShare(&d, desc.Array)
	if c.share == nil {
		return r.probeOnce(ctx, &d, c)
	}
	if e, mine := c.share.load(ctx, time.Now); !mine {
		c.load, c.skip, c.down, c.shared = e.withPlaced(), e.Skip, e.Down, true
		return c
	}
	c = r.probeOnce(ctx, &d, c)
	c.share.put(context.WithoutCancel(ctx), shareEntry{At: time.Now(), Load: c.load, Skip: c.skip, Down: c.down})
	return c
}

// probeOnce asks the target's backend for its load, or reads what the
// agent of the cluster the record names measured (placeagent.go).
func (r *run) probeOnce(ctx context.Context, d *record.Description, c candidate) candidate {
	be, err := r.buildBackend(d) // no memo: the record's is for the placed target only
	if err != nil {
		c.skip, c.down = skipReason(err), !record.Permanent(err)
		return c
	}
	defer closeBackend(be, r.Log)
	prober, ok := be.(backends.LoadProber)
	if !ok {
		return c // no probe: placed by the order of the targets alone
	}
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	job := backends.Job{Name: r.JobName, Properties: d.Properties}
	if d.ScriptLocation == record.Inline {
		job.Script = d.Script
	}
	load, ok := r.publishedLoad(pctx, d, c.target.Cluster, be, job)
	if ok {
		c.shared = true
	} else {
		load, err = prober.ProbeLoad(pctx, job, d.Array)
	}
	switch {
	case err != nil:
		c.skip, c.down = skipReason(err), !record.Permanent(err)
	case !load.Fits:
		c.load, c.skip = load, "does not fit: "+load.Why
	default:
		c.load = load
	}
	return c
}

// skipReason says why a target was skipped in bridge-runner's words: the
// field and fix of an invalid-input error (ours), else only the kind of
// fault, never an error's text, which may carry what a server said.
func skipReason(err error) string {
	var fe *backends.FieldError
	switch {
	case errors.As(err, &fe):
		return "refused the job: " + fe.Error()
	case errors.Is(err, backends.ErrAuth):
		return "refused the credentials"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("did not answer within %s", ProbeTimeout)
	}
	return "did not answer"
}

// resolveCredentials is the directory of a placed target's credentials:
// the step's own for "", a subdirectory of it for a relative path.
func resolveCredentials(base backends.Credentials, dir string) (backends.Credentials, error) {
	if dir == "" {
		return base, nil
	}
	dc, ok := base.(DirCredentials)
	if !ok {
		return nil, backends.Invalid("targets", "a target names a credentials directory, but the step's credentials are not a directory")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(dc.Dir, dir)
	}
	dc.Dir = dir
	return dc, nil
}

// placementSummary is a placement's probes in one line for the log.
func placementSummary(p *record.Placed) string {
	var parts []string
	for _, pr := range p.Probes {
		s := pr.Target
		if pr.Skipped != "" {
			s += " skipped (" + pr.Skipped + ")"
		} else if pr.FreeCPUs != nil && pr.TotalCPUs != nil {
			s += fmt.Sprintf(" free %d/%d", *pr.FreeCPUs, *pr.TotalCPUs)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// choose picks a candidate by policy; the same candidates always give the
// same choice, ties going to the target listed first. No candidate that
// can take the job is an error: transient when any target did not
// answer (a retry may find it back), else invalid input (exit 2).
func choose(policy string, cands []candidate) (int, error) {
	best := -1
	for i, c := range cands {
		if c.skip != "" {
			continue
		}
		if best < 0 || better(policy, c.load, cands[best].load) {
			best = i
		}
		if policy == record.PolicyOrdered && startsNow(c.load) {
			return i, nil
		}
	}
	if best >= 0 {
		if policy == record.PolicyOrdered {
			return firstFit(cands), nil
		}
		return best, nil
	}
	return -1, noTarget(cands)
}

// noTarget is the error of candidates none of which can take the job:
// transient when any target did not answer (a retry may find it back),
// else invalid input (exit 2).
func noTarget(cands []candidate) error {
	var why []string
	down := false
	for _, c := range cands {
		why = append(why, c.target.Name+": "+c.skip)
		down = down || c.down
	}
	msg := "no target can take the job now (" + strings.Join(why, "; ") + ")"
	if down {
		return backends.Transient(errors.New(msg))
	}
	return backends.Invalid("targets", "%s; give a target where it fits", msg)
}

func firstFit(cands []candidate) int {
	for i, c := range cands {
		if c.skip == "" {
			return i
		}
	}
	return -1
}

// better reports whether load a beats load b under policy.
func better(policy string, a, b backends.Load) bool {
	if policy == record.PolicyLeastPending {
		if bothSeconds(a, b) {
			return pendingSecondsPerFree(a) < pendingSecondsPerFree(b)
		}
		return pendingPerFree(a) < pendingPerFree(b)
	}
	if sa, sb := startsNow(a), startsNow(b); sa != sb {
		return sa
	}
	if !a.EstimatedStart.IsZero() && !b.EstimatedStart.IsZero() {
		return a.EstimatedStart.Before(b.EstimatedStart)
	}
	if bothSeconds(a, b) {
		return secondsAhead(a) < secondsAhead(b)
	}
	return backlog(a) < backlog(b)
}

// bothSeconds: both probes told the work ahead in CPU-seconds, which
// then decides instead of counts: one long job waiting is more work than
// several short ones.
func bothSeconds(a, b backends.Load) bool {
	return a.CPUSecondsKnown && b.CPUSecondsKnown && a.TotalCPUs > 0 && b.TotalCPUs > 0 && a.FreeCPUs >= 0 && b.FreeCPUs >= 0
}

// secondsAhead is the CPU-seconds pending and running at the target per
// CPU it has: about how long until what is there drains.
func secondsAhead(l backends.Load) float64 {
	return float64(l.PendingCPUSeconds+l.RunningCPUSeconds) / float64(l.TotalCPUs)
}

// pendingSecondsPerFree is the pending CPU-seconds per free CPU (plus
// one, so a full target compares by its queue).
func pendingSecondsPerFree(l backends.Load) float64 {
	return float64(l.PendingCPUSeconds) / float64(l.FreeCPUs+1)
}

// startsNow: the target has the job's CPUs free and nothing waiting
// ahead of it, as far as its probe knows.
func startsNow(l backends.Load) bool {
	return l.FreeCPUs >= max(l.JobCPUs, 1) && l.PendingJobs == 0
}

// pendingWork is what waits at a target, in CPUs where the probe knows
// them, else in jobs; -1 when unknown.
func pendingWork(l backends.Load) int {
	if l.PendingCPUs >= 0 {
		return l.PendingCPUs
	}
	return l.PendingJobs
}

// backlog is the work ahead of the job beyond what is free, per CPU of
// the target: about how many job lengths it waits. Unknown is last.
func backlog(l backends.Load) float64 {
	w := pendingWork(l)
	if w < 0 || l.FreeCPUs < 0 || l.TotalCPUs <= 0 {
		return math.Inf(1)
	}
	return float64(w+max(l.JobCPUs, 1)-l.FreeCPUs) / float64(l.TotalCPUs)
}

// pendingPerFree is the pending work per free CPU (plus one, so a full
// target compares by its queue). Unknown is last.
func pendingPerFree(l backends.Load) float64 {
	w := pendingWork(l)
	if w < 0 || l.FreeCPUs < 0 {
		return math.Inf(1)
	}
	return float64(w+max(l.JobCPUs, 1)) / float64(l.FreeCPUs+1)
}
