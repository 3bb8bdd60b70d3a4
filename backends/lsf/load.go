package lsf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// ProbeLoad reads the job's queue (jobproperties' queue) with one request,
// "Get basic or detailed queue information by queue name":
// POST ws/queues/getfullinfo with the form names=<queue>
// (https://www.ibm.com/docs/en/slac/10.2.0?topic=queues-get-basic-detailed-queue-information-by-queue-name-post),
// a read that takes its parameter in a body. numPend and numRun are the
// pending and running jobs; a queue whose status is closed (it accepts no
// job) or inactive (it starts none) does not fit; 404 ("no queues that
// match") is a queue LSF does not have, ErrInvalid. Without a queue the job
// goes to the cluster's default queue, which no documented call names: the
// same request for names=all tells only that Application Center answers,
// and the counts are unknown. Slots are not read: the queue's limits are
// not what its hosts have free.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, _ *backends.Array) (backends.Load, error) {
	p, err := parseProps(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	queue := p.vals["QUEUE"]
	names := queue
	if queue == "" {
		names = "all"
	}
	form := url.Values{"names": {names}}.Encode()
	r := request{method: http.MethodPost, path: "/ws/queues/getfullinfo", accept: "application/json",
		contentType: "application/x-www-form-urlencoded",
		body:        func() (io.Reader, error) { return strings.NewReader(form), nil }}
	resp, err := b.open(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound && queue != "" {
		return backends.Load{}, backends.Invalid("jobproperties", "queue %q: LSF has no such queue (%s: HTTP 404)", queue, r)
	}
	if err != nil {
		return backends.Load{}, transientOr(err)
	}
	body, err := httpx.ReadAll(ctx, r.String(), resp, maxQueueBody+1)
	if err != nil {
		return backends.Load{}, err
	}
	if len(body) > maxQueueBody {
		return backends.Load{}, backends.Transient(fmt.Errorf("%s: an answer over %d MiB, which no queue information is (%s)", r, maxQueueBody>>20, httpx.NotShown))
	}
	doc, err := decodeDoc(body)
	if err != nil {
		return backends.Load{}, backends.Transient(fmt.Errorf("%s: HTTP 200 with an answer that is not queue information (%d bytes, %s)", r, len(body), httpx.NotShown))
	}
	if queue == "" {
		return backends.UnknownLoad(""), nil
	}
	return queueLoad(doc, queue, r)
}

// queueLoad reads the named queue's entry of a getfullinfo answer
// ({"@total", "queue": {...} or [...]}, or the XML <queues><queue>).
func queueLoad(doc node, queue string, r request) (backends.Load, error) {
	if inner := firstMap(get(doc, "queues")); inner != nil && get(doc, "queue") == nil {
		doc = inner
	}
	var entry node
	for _, q := range list(get(doc, "queue", "pseudoQueue")) {
		if str(get(q, "queueName", "name")) == queue {
			entry = q
		}
	}
	if entry == nil {
		return backends.Load{}, backends.Transient(fmt.Errorf("%s: HTTP 200 without the queue asked for (%s)", r, httpx.NotShown))
	}
	load := backends.UnknownLoad(queue)
	if n, ok := parseInt(get(entry, "numPend")); ok && n >= 0 {
		load.PendingJobs = n
	}
	if n, ok := parseInt(get(entry, "numRun")); ok && n >= 0 {
		load.RunningJobs = n
	}
	if why := queueClosed(str(get(entry, "status"))); why != "" {
		load.Fits, load.Why = false, "the LSF queue "+queue+" is "+why
	}
	return load, nil
}

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
