package slurm

// The load probe's queue counts from slurmctld's own metrics (Slurm 25.11
// and later): GET <metricsURL>/metrics/partitions, OpenMetrics text that
// gives each partition's pending and running jobs and the CPUs its jobs
// hold. Its size grows with the partitions, not with the jobs slurmctld
// knows, which GET jobs/ carries in full (docs/facts/slurm-26.05.md and
// BENCHMARKS.md have the figures). slurmctld serves it on its own port
// (SlurmctldPort, not slurmrestd's) and only where the site set
// MetricsType=metrics/openmetrics, so the site names it: the credentials'
// metricsURL, e.g. http://slurmctld.example.org:6817. The token goes as to
// slurmrestd; slurmctld checks it where MetricsAuthUsers is set.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// metricsKeys are the credentials' names for slurmctld's metrics URL.
var metricsKeys = []string{"metricsURL", "metrics_url"}

// maxMetricsBody bounds the metrics answer: about 6.5 KB a partition on
// 26.05.5, so 8 MB is over a thousand partitions.
const maxMetricsBody = 8 << 20

// metricsBase reads the credentials' metricsURL as slurmctld's base URL
// ("http://host:port", a trailing /metrics dropped); "" when none is set.
// It is never quoted back: a URL may carry user info.
func (b *Backend) metricsBase() (string, error) {
	raw, err := b.creds.Get(metricsKeys...)
	raw = strings.TrimSpace(raw)
	if err != nil || raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", backends.Invalid("credentials", "metricsURL is not the http(s) URL of slurmctld (its SlurmctldPort, no user, query or fragment), e.g. http://slurmctld.example.org:6817; remove it to count the queue from slurmrestd's jobs/")
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/metrics")
	u.RawPath = ""
	return strings.TrimRight(u.String(), "/"), nil
}

// partQueue is one partition's queue as slurmctld counts it.
type partQueue struct{ pending, running, runCPUs int }

// The metrics of /metrics/partitions the probe reads, by the partQueue
// field they fill.
var partMetrics = map[string]func(*partQueue, int){
	"slurm_partition_jobs_pending":    func(q *partQueue, n int) { q.pending = n },
	"slurm_partition_jobs_running":    func(q *partQueue, n int) { q.running = n },
	"slurm_partition_jobs_cpus_alloc": func(q *partQueue, n int) { q.runCPUs = n },
}

// metricsQueue is GET <base>/metrics/partitions: each partition's queue.
// An answer without a partition's metrics (a slurmctld without MetricsType
// answers 200 with an empty body) and a 404 are the setting's fault; a
// refused token is an auth error that says what slurmctld needs.
func (b *Backend) metricsQueue(ctx context.Context, base string) (map[string]partQueue, error) {
	_, token, err := b.credentials()
	if err != nil {
		return nil, err
	}
	req := httpx.Request{Method: http.MethodGet, URL: base + "/metrics/partitions", Timeout: b.requestTimeout,
		Header: http.Header{}, Server: "slurmctld's metrics", Field: "credentials metricsURL"}
	req.Header.Set("Accept", "text/plain")
	req.Header.Set(defaultTokenHeader, token)
	resp, err := httpx.Open(ctx, b.client, req)
	if err != nil {
		return nil, err
	}
	op := req.Op()
	if resp.StatusCode != http.StatusOK {
		httpx.ReadError(resp)
		return nil, metricsStatusError(op, resp.StatusCode)
	}
	body, err := httpx.ReadAll(ctx, op, resp, maxMetricsBody)
	if err != nil {
		return nil, err
	}
	q := parsePartMetrics(body)
	if len(q) == 0 {
		return nil, backends.Invalid("credentials", "%s: slurmctld at metricsURL answered no partition metrics (%d bytes, not shown): set MetricsType=metrics/openmetrics in its slurm.conf, or remove metricsURL", op, len(body))
	}
	return q, nil
}

// metricsStatusError says what a failed metrics answer means, in our words.
func metricsStatusError(op string, status int) error {
	switch kind := httpx.Kind(status); kind {
	case backends.ErrAuth:
		return httpx.AuthError(op, status, "slurmctld refused the token for its metrics: the token's user must be in MetricsAuthUsers, and Slurm 26.05 also needs SlurmctldHttpAuthParameters=jwt_key=<its key>", "token")
	case backends.ErrTransient:
		return backends.Transient(fmt.Errorf("%s: HTTP %d %s", op, status, http.StatusText(status)))
	default:
		return backends.Invalid("credentials", "%s: HTTP %d %s: metricsURL is not slurmctld's metrics (Slurm 25.11 or later, on its SlurmctldPort); fix it, or remove it to count the queue from slurmrestd's jobs/", op, status, http.StatusText(status))
	}
}

// parsePartMetrics reads the partMetrics samples of an OpenMetrics text,
// by partition: lines `name{partition="p"} value`. Comments, other
// metrics, other labels and unreadable lines are left out.
func parsePartMetrics(body []byte) map[string]partQueue {
	out := map[string]partQueue{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		name, part, value, ok := partSample(sc.Text())
		set := partMetrics[name]
		if !ok || set == nil {
			continue
		}
		q := out[part]
		set(&q, value)
		out[part] = q
	}
	return out
}

// partSample splits one sample line with a sole partition label.
func partSample(line string) (name, part string, value int, ok bool) {
	name, rest, found := strings.Cut(line, `{partition=`)
	if !found || strings.HasPrefix(name, "#") {
		return "", "", 0, false
	}
	end := strings.LastIndex(rest, "} ")
	if end < 0 {
		return "", "", 0, false
	}
	part, err := strconv.Unquote(rest[:end])
	if err != nil || part == "" {
		return "", "", 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(rest[end+2:]), 64)
	if err != nil || f < 0 || f > 1<<31 {
		return "", "", 0, false
	}
	return name, part, int(f), true
}

// addMetricsTo sets the counts of parts from slurmctld's: pending CPUs are not
// among its metrics, so they are unknown (-1) and placement weighs pending
// jobs instead; a partition it does not list has unknown counts.
func addMetricsTo(parts []partLoad, q map[string]partQueue) {
	for i := range parts {
		m, ok := q[parts[i].name]
		if !ok {
			parts[i].pending, parts[i].running, parts[i].pendCPUs, parts[i].noSecs = -1, -1, -1, true
			continue
		}
		// The metrics count jobs and CPUs, not their times.
		parts[i].pending, parts[i].running, parts[i].runCPUs, parts[i].pendCPUs, parts[i].noSecs = m.pending, m.running, m.runCPUs, -1, true
	}
}
