package lsf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// ProbeRequests is how many requests ProbeLoad sends (a logon comes on top
// when no session is kept, as for any request).
const ProbeRequests = 1

// maxQueueBody bounds the queue answer: one queue's detailed information
// is about 2 KB; every queue of a large cluster stays far under this.
const maxQueueBody = 4 << 20

// ProbeLoad reads the queues with one request, "Get basic or detailed
// queue information by queue name": POST ws/queues/getfullinfo with the
// form names=all
// (https://www.ibm.com/docs/en/slac/10.2.0?topic=queues-get-basic-detailed-queue-information-by-queue-name-post),
// a read that takes its parameter in a body, and judges the job's queue
// (jobproperties' queue) among them. numPend and numRun are the pending
// and running jobs; a queue whose status is closed (it accepts no job) or
// inactive (it starts none) does not fit; a queue not among them is one
// LSF does not have, ErrInvalid. Without a queue the job goes to the
// cluster's default queue, which no documented call names: the answer
// tells only that Application Center answers, and the counts are unknown.
// Slots are not read: the queue's limits are not what its hosts have free.
// The request is the cluster's measure (MeasureLoad, the same for every
// job): ProbeLoad is LoadFrom of a fresh one.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, _ *backends.Array) (backends.Load, error) {
	p, err := parseProps(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	m, err := b.measure(ctx)
	if err != nil {
		return backends.Load{}, err
	}
	return judgeQueue(m, p.vals["QUEUE"])
}

// queuesMeasure is every queue's load: what a cluster's agent measures
// once for every step.
type queuesMeasure struct {
	Format int         `json:"f"`
	Queues []queueLoad `json:"q"`
}

// queueLoad is one queue as the measure keeps it: counts -1 when the
// answer did not give them, Closed why it takes no job now (our words,
// queueClosed's), "" when it does.
type queueLoad struct {
	Name    string `json:"n"`
	Pending int    `json:"p"`
	Running int    `json:"r"`
	Closed  string `json:"c,omitempty"`
}

// measureFormat names the published measure's format: a measure of any
// other is not read (the step probes for itself).
const measureFormat = 1

// measure sends the one request for every queue.
func (b *Backend) measure(ctx context.Context) (queuesMeasure, error) {
	form := url.Values{"names": {"all"}}.Encode()
	r := request{method: http.MethodPost, path: "/ws/queues/getfullinfo", accept: "application/json",
		contentType: "application/x-www-form-urlencoded",
		body:        func() (io.Reader, error) { return strings.NewReader(form), nil }}
	resp, err := b.open(ctx, r)
	if err != nil {
		return queuesMeasure{}, transientOr(err)
	}
	body, err := httpx.ReadAll(ctx, r.String(), resp, maxQueueBody+1)
	if err != nil {
		return queuesMeasure{}, err
	}
	if len(body) > maxQueueBody {
		return queuesMeasure{}, backends.Transient(fmt.Errorf("%s: an answer over %d MiB, which no queue information is (%s)", r, maxQueueBody>>20, httpx.NotShown))
	}
	doc, err := decodeDoc(body)
	if err != nil {
		return queuesMeasure{}, backends.Transient(fmt.Errorf("%s: HTTP 200 with an answer that is not queue information (%d bytes, %s)", r, len(body), httpx.NotShown))
	}
	return queuesOf(doc), nil
}

// queuesOf reads every queue's entry of a getfullinfo answer
// ({"@total", "queue": {...} or [...]}, or the XML <queues><queue>).
func queuesOf(doc node) queuesMeasure {
	if inner := firstMap(get(doc, "queues")); inner != nil && get(doc, "queue") == nil {
		doc = inner
	}
	m := queuesMeasure{Format: measureFormat}
	for _, q := range list(get(doc, "queue", "pseudoQueue")) {
		ql := queueLoad{Name: str(get(q, "queueName", "name")), Pending: -1, Running: -1, Closed: queueClosed(str(get(q, "status")))}
		if n, ok := parseInt(get(q, "numPend")); ok && n >= 0 {
			ql.Pending = n
		}
		if n, ok := parseInt(get(q, "numRun")); ok && n >= 0 {
			ql.Running = n
		}
		if queueName.MatchString(ql.Name) {
			m.Queues = append(m.Queues, ql)
		}
	}
	return m
}

// queueName is what a queue name may be (lsb.queues: letters, digits,
// '_', '-', '.', 59 characters at most): the measure keeps no other text
// of the server's.
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,59}$`)

// judgeQueue is the Load of a job in queue ("" the default one) of m.
func judgeQueue(m queuesMeasure, queue string) (backends.Load, error) {
	if queue == "" {
		return backends.UnknownLoad(""), nil
	}
	for _, q := range m.Queues {
		if q.Name != queue {
			continue
		}
		load := backends.UnknownLoad(queue)
		load.PendingJobs, load.RunningJobs = q.Pending, q.Running
		if q.Closed != "" {
			load.Fits, load.Why = false, "the LSF queue "+queue+" is "+q.Closed
		}
		return load, nil
	}
	return backends.Load{}, backends.Invalid("jobproperties", "queue %q: LSF has no such queue (POST ws/queues/getfullinfo names=all does not list it); name one bqueues lists, or leave queue out for the default", queue)
}

// MeasureLoad implements backends.LoadPublisher: ProbeLoad's one request,
// as one line of JSON (queue names and figures only).
func (b *Backend) MeasureLoad(ctx context.Context) (string, error) {
	m, err := b.measure(ctx)
	if err != nil {
		return "", err
	}
	return backends.EncodeMeasure(m, fmt.Sprintf("%d queues", len(m.Queues)))
}

// LoadFrom implements backends.LoadPublisher.
func (b *Backend) LoadFrom(measure string, job backends.Job, _ *backends.Array) (backends.Load, error) {
	var m queuesMeasure
	if json.Unmarshal([]byte(measure), &m) != nil || m.Format != measureFormat {
		return backends.Load{}, backends.ErrMeasureFormat
	}
	p, err := parseProps(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	return judgeQueue(m, p.vals["QUEUE"])
}

var _ backends.LoadPublisher = (*Backend)(nil)

// queueClosed reads a queue's status, as bqueues writes it ("Open:Active",
// "Closed:Inact", ...) or as the LSF API's qStatus bits (1 open, 2 active),
// and says why it takes no job now ("" when it does, or when the status
// is not readable).
func queueClosed(status string) string {
	if n, ok := parseInt(status); ok {
		switch {
		case n&1 == 0:
			return "closed (it accepts no new job)"
		case n&2 == 0:
			return "inactive (it starts no job)"
		}
		return ""
	}
	s := strings.ToLower(status)
	switch {
	case strings.Contains(s, "closed"):
		return "closed (it accepts no new job)"
	case strings.Contains(s, "inact"):
		return "inactive (it starts no job)"
	}
	return ""
}
