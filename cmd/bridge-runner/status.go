package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

type statusOptions struct {
	store         record.StoreOptions
	allNamespaces bool
	output        string
	watch         bool
	states        []string
	backends      []string
	jobs          []string
}

func (a *app) newStatusCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:     "status [JOB...]",
		Aliases: []string{"get"},
		Short:   "List the jobs' records of a namespace or a state directory",
		Long: `status lists the records of a namespace (the ConfigMaps bridge-runner created,
found by their label app.kubernetes.io/managed-by=bridge-runner) or of a state
directory (--store file), one job a line: name, backend, state, remote job id and
age, in 80 columns; -o wide adds the target (the host of its resourceURL), the
owner (BridgeJob, workflow step or Job), the backend's state and reason, the kill
flag, an array's tasks, the queue wait (submit to start), the start against
the placement's estimate (START: late 5m, early 30s, or the predicted start
while the job waits), the efficiency (CPU,
memory and time used against what was asked, from the cluster's accounting), the
moves (MOVES: how often re-placement moved the job and its last move, "1, last
hpc-a/4242→hpc-b"; -o json and yaml list every move with the evidence that
the job left behind never started) and the message. On a terminal the state is in colour
(NO_COLOR=1 turns it off). It reads records only and never asks a backend, so it
is cheap and safe to run often; a record shows what its invoke last wrote. A job
named as an argument that has no record is an error (exit 1), as with kubectl get.

With --watch it prints the table, then a line each time a shown column of a
record changes (a Kubernetes watch on the ConfigMaps; a state directory is polled
every 2s), in the table's columns, until interrupted; a deleted record's state
reads "deleted".`,
		Example: `  bridge-runner status
  bridge-runner status -n science --state RUNNING,PENDING
  bridge-runner get sim-42 -o yaml
  bridge-runner status --store file --state-dir /var/lib/bridge -w`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.jobs = args
			if err := o.check(a); err != nil {
				return err
			}
			code, err := a.runStatus(cmd.Context(), o)
			if err != nil {
				a.log.Error("status failed", "err", err)
			}
			return exitError{code}
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.store.Namespace, "namespace", "n", "", "namespace of the records (env NAMESPACE too; default: the pod's namespace, else the kubeconfig's)")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the records of every namespace")
	fs.StringVar(&o.store.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the Kubernetes API outside a cluster (default $KUBECONFIG)")
	fs.StringVar(&o.store.StateDir, "state-dir", "", "list the state files in this directory instead of ConfigMaps (default outside a cluster: $XDG_STATE_HOME/bridge-runner, else ~/.local/state/bridge-runner)")
	fs.StringVar(&o.store.Kind, "store", "auto", "where the records are kept: auto, configmap or file (auto: file with --state-dir or outside a cluster, else configmap)")
	fs.StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	fs.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each change to a record until interrupted")
	fs.StringSliceVar(&o.states, "state", nil, "only jobs in these states (comma-separated): "+stateNames())
	fs.StringSliceVar(&o.backends, "backend", nil, "only jobs of these backends (comma-separated)")
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackends)
	// A pod's BRIDGE_BACKEND names its own job's backend; it must not
	// quietly filter a listing, nor BRIDGE_OUTPUT pick its format.
	for _, f := range []string{"all-namespaces", "output", "watch", "state", "backend"} {
		_ = fs.SetAnnotation(f, noEnv, []string{"true"})
	}
	wrappedHelp(cmd)
	return cmd
}

func stateNames() string {
	var s []string
	for _, st := range backends.States {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// check refuses bad flags and arguments (exit 2, naming them).
func (o *statusOptions) check(a *app) error {
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return usageError{fmt.Errorf("--output: %q is not a format; use wide, json or yaml (or leave it out for a table)", o.output)}
	}
	switch o.store.Kind {
	case "auto", "configmap", "file":
	default:
		return usageError{fmt.Errorf("--store: %q is not a store; use auto, configmap or file", o.store.Kind)}
	}
	for i, s := range o.states {
		o.states[i] = strings.ToUpper(strings.TrimSpace(s))
		if !backends.State(o.states[i]).Valid() {
			return usageError{fmt.Errorf("--state: %q is not a state; use one or more of %s", s, stateNames())}
		}
	}
	for _, b := range o.backends {
		if !slices.Contains(a.registry.Names(), b) {
			return usageError{fmt.Errorf("--backend: %q is not a backend; use one or more of %s", b, strings.Join(a.registry.Names(), ", "))}
		}
	}
	for _, j := range o.jobs {
		if err := record.ValidateJobName(j); err != nil {
			return usageError{fmt.Errorf("job name argument %q: %w", j, err)}
		}
	}
	if o.allNamespaces && o.store.Namespace != "" {
		return usageError{errors.New("--all-namespaces and --namespace exclude each other; give one")}
	}
	return nil
}

func (a *app) runStatus(ctx context.Context, o *statusOptions) (int, error) {
	o.store.UserAgent = "bridge-runner/" + versionString()
	l, err := o.store.OpenLister(o.allNamespaces)
	if err != nil {
		return exitCode(nil, err), err
	}
	items, version, err := l.List(ctx)
	if err != nil {
		return exitCode(nil, err), err
	}
	p := &statusPrinter{w: a.stdout, o: o, now: time.Now, last: map[string]string{}, colour: colourOn(a.stdout)}
	var rows []statusRow
	found := map[string]bool{}
	for _, it := range items {
		found[it.Job] = true
		if r := toRow(it); o.match(r) {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 && len(o.jobs) == 0 && o.output != "json" && o.output != "yaml" {
		fmt.Fprintf(a.stderr, "No records found (%s).\n", l.Describe())
	}
	if err := p.list(rows); err != nil {
		return exitCode(nil, err), err
	}
	code := ExitDone
	for _, j := range o.jobs {
		if !found[j] {
			// As kubectl get: a name asked for and not found is an error.
			fmt.Fprintf(a.stderr, "Error: job %q has no record (%s)\n", j, l.Describe())
			code = ExitFailed
		}
	}
	if !o.watch {
		return code, nil
	}
	for ev := range l.Watch(ctx, version) {
		r := toRow(ev.Listed)
		if ev.Deleted {
			r.Event = "DELETED"
		}
		if o.match(r) {
			p.change(r)
		}
	}
	return ExitDone, nil // interrupted: the end of a watch
}

// statusRow is one job as status prints it; -o json and yaml print these.
type statusRow struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace,omitempty"`
	Backend      string `json:"backend,omitempty"`
	Target       string `json:"target,omitempty"`
	State        string `json:"state,omitempty"`
	BackendState string `json:"backendState,omitempty"`
	Reason       string `json:"reason,omitempty"`
	JobID        string `json:"jobID,omitempty"`
	Owner        string `json:"owner,omitempty"`
	Kill         bool   `json:"kill,omitempty"`
	// Placement is where placement sent a job with targets, and why.
	Placement *record.Placed `json:"placement,omitempty"`
	// Tasks is a job array's tasks by state, "DONE=950 FAILED=50".
	Tasks      string `json:"tasks,omitempty"`
	Message    string `json:"message,omitempty"`
	SubmitTime string `json:"submitTime,omitempty"`
	StartTime  string `json:"startTime,omitempty"`
	EndTime    string `json:"endTime,omitempty"`
	// QueueWaitSeconds is start − submit, from the record's times.
	QueueWaitSeconds *int64 `json:"queueWaitSeconds,omitempty"`
	// Efficiency is what the ended job used against what it asked
	// (status.efficiency), when invoke could read the accounting.
	Efficiency *record.Efficiency `json:"efficiency,omitempty"`
	// StartEstimate is the placement's predicted start against the
	// observed one (status.startEstimate).
	StartEstimate *startEstimate `json:"startEstimate,omitempty"`
	// Moves are the jobs re-placement left behind, cancelled before they
	// started (status.moves, oldest first); Move is a move under way
	// (status.move).
	Moves   []record.Moved `json:"moves,omitempty"`
	Move    *record.Move   `json:"move,omitempty"`
	Created time.Time      `json:"created"`
	Record  string         `json:"record"`
	// Event is set while watching: ADDED, MODIFIED or DELETED.
	Event string `json:"event,omitempty"`
}

func toRow(l record.Listed) statusRow {
	d := l.Record.Data
	state := d[record.KeyJobStatus]
	state = string(record.StateOf(state)) // IBM's KILL too, in a record of a BridgeJob (--status-keys)
	backend, target := d["backend"], record.TargetHost(d["resourceURL"])
	placed, _ := record.ParsePlaced(d[record.KeyPlacement])
	moves, move := movesOf(d)
	if placed != nil {
		// Where placement sent the job: the target's name and host.
		if desc, err := record.DescribeRecord(d); err == nil {
			backend, target = desc.Backend, placed.Target+"="+record.TargetHost(desc.ResourceURL)
		}
	}
	return statusRow{
		Name: l.Job, Namespace: l.Namespace, Backend: backend, Target: target, Placement: placed,
		State: state, BackendState: d[record.KeyRawState], Reason: d[record.KeyReason],
		JobID: d[record.KeyID], Owner: record.RecordOwner(l), Kill: d[record.KeyKill] == "true", Tasks: d[record.KeyArrayCounts],
		Message: d[record.KeyMessage], SubmitTime: d[record.KeySubmit], StartTime: d[record.KeyStart], EndTime: d[record.KeyEnd],
		QueueWaitSeconds: queueWait(d), Efficiency: efficiencyOf(d), StartEstimate: startEstimateOf(d),
		Moves: moves, Move: move, Created: l.Created.UTC().Truncate(time.Second), Record: l.Where,
	}
}

// queueWait is the record's start − submit; nil before the start.
func queueWait(d map[string]string) *int64 {
	submit, err1 := time.Parse(time.RFC3339, d[record.KeySubmit])
	start, err2 := time.Parse(time.RFC3339, d[record.KeyStart])
	if err1 != nil || err2 != nil {
		return nil
	}
	return record.QueueWait(submit, start)
}

// efficiencyOf is the record's efficiency; one edited into something
// bridge-runner never writes shows as none.
func efficiencyOf(d map[string]string) *record.Efficiency {
	e, _ := record.ParseEfficiency(d[record.KeyEfficiency])
	return e
}

// waitCell is the queue wait as kubectl writes ages: 45s, 3m20s, 2h.
func waitCell(w *int64) string {
	if w == nil {
		return ""
	}
	return duration.HumanDuration(time.Duration(*w) * time.Second)
}

// efficiencyCell is "cpu 93% mem 12% time 5%", each part when known;
// "unavailable" when the accounting could not be read.
func efficiencyCell(e *record.Efficiency) string {
	if e == nil {
		return ""
	}
	var parts []string
	for _, p := range []struct {
		name string
		r    *float64
	}{{"cpu", e.CPU}, {"mem", e.Memory}, {"time", e.Time}} {
		if p.r != nil {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", p.name, *p.r*100))
		}
	}
	if len(parts) == 0 && e.Unavailable != "" {
		return "unavailable"
	}
	return strings.Join(parts, " ")
}

func (o *statusOptions) match(r statusRow) bool {
	return (len(o.states) == 0 || slices.Contains(o.states, r.State)) &&
		(len(o.backends) == 0 || slices.Contains(o.backends, r.Backend)) &&
		(len(o.jobs) == 0 || slices.Contains(o.jobs, r.Name))
}

// statusPrinter prints the list, then changes. A table's columns are as
// wide as the list's widest cell, and so stay while watching (like kubectl);
// a watch gives each column room for what a change may bring (a longer
// state, a new job's name).
type statusPrinter struct {
	w      io.Writer
	o      *statusOptions
	now    func() time.Time
	widths []int
	last   map[string]string // what was printed last for each record, to skip repeats
	colour bool              // colour the state (a terminal, NO_COLOR unset)
}

// colourOn: colour only on a terminal, and never with NO_COLOR set
// (https://no-color.org) or TERM=dumb.
func colourOn(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" && term.IsTerminal(int(f.Fd()))
}

// tableWidth is what the default table fits in: a terminal's smallest
// usual width. -o wide is as wide as its cells.
const tableWidth = 80

// fit narrows the default table's job id, then name, columns until the
// table fits tableWidth; line shortens their longer cells with "…" (-o
// wide and JSON show them whole).
func (p *statusPrinter) fit() {
	if p.o.output == "wide" {
		return
	}
	h := p.header()
	for _, col := range []string{"JOB-ID", "NAME"} {
		total := 3 * (len(p.widths) - 1)
		for _, w := range p.widths {
			total += w
		}
		i := slices.Index(h, col)
		if over := total - tableWidth; over > 0 {
			p.widths[i] = max(p.widths[i]-over, 12)
		}
	}
}

// watchMinWidths are the columns' least widths while watching: the widest
// state, a job id and a name of common lengths, so a change's row stays in
// the columns.
var watchMinWidths = map[string]int{"NAME": 20, "BACKEND": 8, "STATE": len("SUSPENDED"), "JOB-ID": 12, "AGE": 5}

func (p *statusPrinter) list(rows []statusRow) error {
	switch p.o.output {
	case "json", "yaml":
		if p.o.watch {
			for _, r := range rows {
				p.change(r)
			}
			return nil
		}
		if rows == nil {
			rows = []statusRow{}
		}
		return p.encode(map[string]any{"items": rows}, true)
	}
	cells := [][]string{p.header()}
	for _, r := range rows {
		cells = append(cells, p.cells(r))
		p.last[r.Record] = p.key(r)
	}
	p.widths = make([]int, len(cells[0]))
	for _, row := range cells {
		for i, c := range row {
			p.widths[i] = max(p.widths[i], utf8.RuneCountInString(c))
		}
	}
	if p.o.watch {
		for i, h := range cells[0] {
			p.widths[i] = max(p.widths[i], watchMinWidths[h])
		}
	}
	p.fit()
	if len(rows) == 0 && !p.o.watch {
		return nil
	}
	for _, row := range cells {
		p.line(row)
	}
	return nil
}

// change prints one record's new state, unless it prints as before (a
// write of log offsets or memos changes no column).
func (p *statusPrinter) change(r statusRow) {
	k := p.key(r)
	if p.last[r.Record] == k {
		return
	}
	_, seen := p.last[r.Record]
	p.last[r.Record] = k
	if r.Event == "" && !seen {
		r.Event = "ADDED"
	}
	if r.Event == "DELETED" {
		delete(p.last, r.Record)
	}
	switch p.o.output {
	case "json", "yaml":
		if r.Event == "" {
			r.Event = "MODIFIED"
		}
		_ = p.encode(r, false)
	default:
		p.line(p.cells(r))
	}
}

// key is what a row shows, but its age: a table prints a change only when
// a shown column changed; JSON and YAML show every field.
func (p *statusPrinter) key(r statusRow) string {
	r.Created = time.Time{}
	switch p.o.output {
	case "json", "yaml":
		b, _ := json.Marshal(r)
		return string(b)
	}
	c := p.cells(r)
	return strings.Join(slices.Delete(c, p.ageColumn(), p.ageColumn()+1), "\x00")
}

// ageColumn is the index of AGE in the table's cells.
func (p *statusPrinter) ageColumn() int { return slices.Index(p.header(), "AGE") }

func (p *statusPrinter) encode(v any, indent bool) error {
	if p.o.output == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		if p.o.watch {
			fmt.Fprintln(p.w, "---")
		}
		_, err = p.w.Write(b)
		return err
	}
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err == nil {
		fmt.Fprintln(p.w, string(b))
	}
	return err
}

// header names the table's columns: five that fit 80 columns, and with
// -o wide the rest.
func (p *statusPrinter) header() []string {
	h := []string{"NAME", "BACKEND", "STATE", "JOB-ID", "AGE"}
	if p.o.output == "wide" {
		h = []string{"NAME", "BACKEND", "TARGET", "STATE", "JOB-ID", "OWNER", "AGE", "BACKEND-STATE", "REASON", "KILL", "TASKS", "WAIT", "START", "EFFICIENCY", "MOVES", "MESSAGE"}
	}
	if p.o.allNamespaces {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

func (p *statusPrinter) cells(r statusRow) []string {
	age := "<unknown>"
	if !r.Created.IsZero() {
		age = duration.HumanDuration(p.now().Sub(r.Created))
	}
	state := none(r.State)
	if r.Event == "DELETED" {
		state = "deleted"
	}
	c := []string{r.Name, none(r.Backend), state, none(r.JobID), age}
	if p.o.output == "wide" {
		kill := ""
		if r.Kill {
			kill = "true"
		}
		c = []string{r.Name, none(r.Backend), none(r.Target), state, none(r.JobID), none(r.Owner), age,
			none(r.BackendState), none(r.Reason), none(kill), none(r.Tasks), none(waitCell(r.QueueWaitSeconds)),
			none(r.StartEstimate.cell()), none(efficiencyCell(r.Efficiency)), none(movesCell(r.Moves, r.Move)), none(oneLine(r.Message))}
	}
	if p.o.allNamespaces {
		c = append([]string{r.Namespace}, c...)
	}
	return c
}

func (p *statusPrinter) line(cells []string) {
	var b strings.Builder
	state := slices.Index(p.header(), "STATE")
	for i, c := range cells {
		if n := utf8.RuneCountInString(c); n > p.widths[i] && p.o.output != "wide" && i < len(cells)-1 {
			c = string([]rune(c)[:p.widths[i]-1]) + "…"
		}
		pad := strings.Repeat(" ", max(p.widths[i]-utf8.RuneCountInString(c), 0)+3)
		if i == state && p.colour {
			c = stateColour(c)
		}
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(pad)
		}
	}
	fmt.Fprintln(p.w, b.String())
}

// stateColour colours a state as kubectl-like tools do: done green, failed
// red, killed and unknown yellow, running cyan; the rest plain.
func stateColour(s string) string {
	code := map[string]string{"DONE": "32", "FAILED": "31", "KILLED": "33", "UNKNOWN": "33", "RUNNING": "36", "deleted": "2"}[s]
	if code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// oneLine keeps a table row one line: a message's first line.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
