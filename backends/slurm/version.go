package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// apiVersion is a slurmrestd OpenAPI plugin version v0.0.N, stored as N.
type apiVersion int

// The versions whose wire shapes this package knows. A pinned newer version
// is spoken like the newest known one.
const (
	minVersion apiVersion = 38
	maxVersion apiVersion = 46
)

// From v0.0.42 to v0.0.46 nothing this package sends or reads changed in
// SchedMD's published OpenAPI (job.script, environment as an array,
// {set,infinite,number} numbers, job_state as base state plus flags,
// exit_code as an object, top-level job_id), except one new job state flag
// in v0.0.44, EXPEDITING (state.go). Slurm 25.11.0 deprecated the top-level
// script and 25.11.1 took it back; job.script, which we send from v0.0.41
// on, works in all of them. v0.0.46 (Slurm master, to be 26.11; its
// data_parser source is the published definition, no JSON spec is out yet)
// renames the job's container_type (new in v0.0.45) to runtime and drops
// partition and signal fields; we use none of them. Master serves
// v0.0.43-v0.0.46: v0.0.42 is gone and v0.0.43 is deprecated (removed in
// 27.05). Discovery takes the newest version both sides speak, so a
// deprecated one is spoken only when a server serves nothing newer that we
// know, or when resourceURL pins it.

func (v apiVersion) String() string { return "v0.0." + strconv.Itoa(int(v)) }

// What differs between versions when we send; everything we read is decoded
// by its shape, whatever the version (see state.go).

// envAsObject: v0.0.38 takes "environment" only as an object (an array gives
// 400 "environment must be a dictionary"); v0.0.39+ take a "K=V" array.
func (v apiVersion) envAsObject() bool { return v <= 38 }

// timeLimitAsStruct: v0.0.39+ take time_limit as {set,infinite,number};
// v0.0.38 takes an integer or a string and rejects the object.
func (v apiVersion) timeLimitAsStruct() bool { return v >= 39 }

// scriptInJob: v0.0.41+ prefer job.script (the top-level script is
// deprecated there); earlier versions require the top-level one.
func (v apiVersion) scriptInJob() bool { return v >= 41 }

var versionPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.*)/slurm/v0\.0\.(\d+)$`) })

// parseURL splits resourceURL into slurmrestd's base URL (scheme, host and
// any proxy prefix) and the API version its path pins, if any: both
// http://host:6820 and http://host:6820/slurm/v0.0.40/ are accepted. A pinned
// version older than v0.0.38 is returned as old so the caller can say it is
// ignored.
func parseURL(raw string) (base string, pinned, old apiVersion, err error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", 0, 0, backends.Invalid("resourceURL", "the slurm backend needs slurmrestd's URL, e.g. http://slurm.example.org:6820")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", 0, 0, backends.Invalid("resourceURL", "%q is not an http(s) URL of slurmrestd, e.g. http://slurm.example.org:6820", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", 0, 0, backends.Invalid("resourceURL", "%q has a query or fragment; give slurmrestd's base URL", raw)
	}
	path := strings.TrimRight(u.Path, "/")
	if m := versionPath().FindStringSubmatch(path); m != nil {
		n, _ := strconv.Atoi(m[2])
		path = m[1]
		if apiVersion(n) < minVersion {
			old = apiVersion(n)
		} else {
			pinned = apiVersion(n)
		}
	}
	u.Path, u.RawPath = path, ""
	return strings.TrimRight(u.String(), "/"), pinned, old, nil
}

// versionState holds the API version in use, found once per backend.
type versionState struct {
	mu       sync.Mutex
	v        apiVersion
	release  string // Slurm release, for messages
	recalled bool   // v came from the record, not from this slurmrestd
}

// version returns the API version to speak: the pinned one, one recalled
// from an earlier invoke of the job (see Recall), one this process already
// found for the cluster (see clusterVersion), or the newest one that both
// slurmrestd and this package know (see discover). The answer is kept for
// the backend's life.
func (b *Backend) version(ctx context.Context) (apiVersion, error) {
	b.ver.mu.Lock()
	defer b.ver.mu.Unlock()
	if b.ver.v != 0 {
		return b.ver.v, nil
	}
	if b.pinned != 0 {
		b.ver.v = b.pinned
		if b.pinned > maxVersion {
			b.log.Warn("resourceURL pins a slurmrestd API newer than this backend knows; speaking it like the newest known one", "pinned", b.pinned.String(), "newest_known", maxVersion.String())
		}
		return b.ver.v, nil
	}
	c := clusterVersionOf(b)
	// One discovery at a time per cluster: the others wait for its answer
	// instead of asking too (a burst of steps in one process asks once).
	select {
	case c.flight <- struct{}{}:
		defer func() { <-c.flight }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if v, release := c.get(); v != 0 {
		// Found by another user of the cluster in this process; like a
		// recalled one, it is dropped if slurmrestd stops serving it.
		b.ver.v, b.ver.release, b.ver.recalled = v, release, true
		b.log.Debug("slurmrestd API known in this process", "api", v.String())
		return v, nil
	}
	v, release, err := b.discover(ctx)
	if err != nil {
		return 0, err
	}
	c.set(v, release)
	b.ver.v, b.ver.release = v, release
	b.log.Info("slurmrestd API found", "api", v.String(), "slurm", release)
	return v, nil
}

// clusterVersion is what this process found of one cluster's API version,
// shared by every backend built for it (invoke, placement, the watcher), so
// that the cluster is asked once per process rather than once per use.
type clusterVersion struct {
	flight  chan struct{} // held while discovering
	mu      sync.Mutex
	v       apiVersion
	release string
}

// clusterKey names a cluster as this process reaches it: slurmrestd's base
// URL and the HTTP client (its TLS trust and proxies), since one URL reached
// through another client may be another server.
type clusterKey struct {
	base   string
	client *http.Client
}

var clusterVersions = struct {
	sync.Mutex
	m map[clusterKey]*clusterVersion
}{m: map[clusterKey]*clusterVersion{}}

func clusterVersionOf(b *Backend) *clusterVersion {
	clusterVersions.Lock()
	defer clusterVersions.Unlock()
	k := clusterKey{b.base, b.client}
	c := clusterVersions.m[k]
	if c == nil {
		c = &clusterVersion{flight: make(chan struct{}, 1)}
		clusterVersions.m[k] = c
	}
	return c
}

func (c *clusterVersion) get() (apiVersion, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v, c.release
}

func (c *clusterVersion) set(v apiVersion, release string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v, c.release = v, release
}

// forget drops v if it is still the one kept: slurmrestd no longer serves it.
func (c *clusterVersion) forget(v apiVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v == v {
		c.v, c.release = 0, ""
	}
}

// discover finds the newest version this package knows that slurmrestd
// serves by asking each known version's ping, newest first, and stopping at
// the first that answers. Real slurmrestd (22.05, 24.11) answers ping of a
// version whose plugin is loaded with JSON (a few hundred bytes) and any
// other version with a 69-byte text/plain 404; it checks the token before
// the path (401 for any path), does not answer HEAD (411) and ignores
// Range. So this costs a few small requests (5 on 24.11, 9 on 22.05, about
// 1 KB in all) where /openapi/v3 is 208 KB on 22.05 and 663 KB on 24.11.
// The document is read only when the pings cannot tell: none of the known
// versions is served (a newer Slurm serving only newer ones), or a gateway
// refuses ping (403).
func (b *Backend) discover(ctx context.Context) (apiVersion, string, error) {
	for v := maxVersion; v >= minVersion; v-- {
		r, err := b.do(ctx, http.MethodGet, "/slurm/"+v.String()+"/ping", nil)
		switch {
		case err != nil:
			return 0, "", err
		case r.status == http.StatusUnauthorized:
			return 0, "", b.authError(r)
		case r.status == http.StatusNotFound:
			// Plugin not loaded; a gateway's 404 may be JSON, but a
			// served ping never answers 404.
			continue
		case r.json:
			// The version's plugin answered, whatever its status (a
			// slurmctld that is down is its ping's news, not ours).
			return v, r.env.Meta.release(), nil
		case r.status == http.StatusForbidden:
			b.log.Info("slurmrestd's ping is not reachable; reading /openapi/v3 instead", "status", r.status)
			return b.discoverOpenAPI(ctx)
		case r.busy():
			// A higher version may be served too: do not settle for less.
			return 0, "", httpx.WithRetryAfter(backends.Transient(fmt.Errorf("finding slurmrestd's API version: %s", r)), r.retryAfter)
		}
		return 0, "", b.classify(ctx, r, "")
	}
	b.log.Info("slurmrestd serves none of the known APIs' ping; reading /openapi/v3", "known", minVersion.String()+".."+maxVersion.String())
	return b.discoverOpenAPI(ctx)
}

// discoverOpenAPI asks GET /openapi/v3 which plugin versions slurmrestd
// serves, from the keys of its paths (/slurm/v0.0.N/...), and picks the
// newest one this package knows; a server that serves only newer ones gets
// the oldest of those, spoken like the newest known.
func (b *Backend) discoverOpenAPI(ctx context.Context) (apiVersion, string, error) {
	resp, err := b.open(ctx, http.MethodGet, "/openapi/v3", nil)
	if err != nil {
		return 0, "", err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode == http.StatusOK && mt == "application/json" {
		return b.pick(readOpenAPI(ctx, resp))
	}
	r, err := readAnswer(ctx, http.MethodGet, "/openapi/v3", resp)
	switch {
	case err != nil:
		return 0, "", err
	case r.status == http.StatusUnauthorized:
		return 0, "", b.authError(r)
	case r.status == http.StatusOK && r.json: // JSON without its content type
		return b.pick(scanOpenAPI(bytes.NewReader(r.body)))
	case r.status == http.StatusNotFound || r.status == http.StatusForbidden:
		return 0, "", backends.Invalid("resourceURL", "%s serves none of the slurmrestd APIs %s..%s (every /slurm/vX/ping and /openapi/v3 are refused or not found); is it slurmrestd, started with -s openapi/...?", b.base, minVersion, maxVersion)
	}
	return 0, "", b.classify(ctx, r, "")
}

// pick chooses the version to speak from the versions /openapi/v3 lists.
func (b *Backend) pick(served map[apiVersion]bool, info string, err error) (apiVersion, string, error) {
	if err != nil {
		return 0, "", err
	}
	best, above := apiVersion(0), apiVersion(0)
	for v := range served {
		switch {
		case v > maxVersion:
			if above == 0 || v < above {
				above = v
			}
		case v >= minVersion && v > best:
			best = v
		}
	}
	if best == 0 {
		best = above
	}
	if best == 0 {
		return 0, "", backends.Invalid("resourceURL", "%s serves none of the slurmrestd APIs %s..%s (its /openapi/v3 lists %s); is it slurmrestd, started with the openapi/slurmctld plugin (or -s openapi/v0.0.38 on 22.05)?",
			b.base, minVersion, maxVersion, listVersions(served))
	}
	if best > maxVersion {
		b.log.Warn("slurmrestd serves only APIs newer than this backend knows; speaking the oldest of them like the newest known one", "api", best.String(), "newest_known", maxVersion.String())
	}
	return best, slurmRelease(info), nil
}

// readOpenAPI reads and closes slurmrestd's /openapi/v3 answer as a stream
// (scanOpenAPI); a failure to read it is transient, as httpx.ReadAll's.
func readOpenAPI(ctx context.Context, resp *http.Response) (map[apiVersion]bool, string, error) {
	defer resp.Body.Close()
	body := &readErr{r: io.LimitReader(resp.Body, httpx.MaxBody)}
	served, info, err := scanOpenAPI(body)
	switch {
	case body.err != nil && ctx.Err() != nil:
		return nil, "", ctx.Err()
	case body.err != nil:
		return nil, "", backends.Transient(fmt.Errorf("GET /openapi/v3: reading the answer: %w", body.err))
	}
	return served, info, err
}

// readErr remembers a failure of the reader beneath, which the JSON decoder
// would report as if the document were wrong.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// scanOpenAPI reads from an OpenAPI document the plugin versions that the
// keys of its paths name, and info.version. The document is large (208 KB
// on 22.05, 662 KB on 24.11, most of it components) and read once per
// process, so it is decoded as it streams in rather than held whole: held,
// it was the largest use of an invoke's heap, and with N invokers starting
// at once (BenchmarkScale) it raised the heap per invoker by 60-80 KiB. The
// decoder holds one value below the document's second level at a time.
func scanOpenAPI(r io.Reader) (map[apiVersion]bool, string, error) {
	dec := json.NewDecoder(r)
	served := map[apiVersion]bool{}
	var info struct {
		Version string `json:"version"`
	}
	err := forEachKey(dec, func(key string) error {
		switch key {
		case "info":
			return dec.Decode(&info)
		case "paths":
			return forEachKey(dec, func(p string) error {
				if m := servedPath().FindStringSubmatch(p); m != nil {
					n, _ := strconv.Atoi(m[1])
					served[apiVersion(n)] = true
				}
				return skipValue(dec, 0)
			})
		}
		return skipValue(dec, 2)
	})
	if err != nil {
		return nil, "", fmt.Errorf("GET /openapi/v3: cannot read the answer: %w", err)
	}
	return served, info.Version, nil
}

// forEachKey reads a JSON object from dec, calling f with each key; f must
// read the key's value.
func forEachKey(dec *json.Decoder, f func(key string) error) error {
	if t, err := dec.Token(); err != nil {
		return err
	} else if t != json.Delim('{') {
		return fmt.Errorf("%v where an object should begin", tokenKind(t))
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if err := f(t.(string)); err != nil { // json.Decoder gives object keys as strings
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// skipValue reads the next value from dec and keeps nothing. The first
// levels of objects and arrays are walked token by token, so that only
// values below them are held whole while decoding (one path, one schema):
// token by token throughout allocates three times the document.
func skipValue(dec *json.Decoder, levels int) error {
	if levels == 0 {
		return dec.Decode(&skipJSON{})
	}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return nil
	}
	for dec.More() {
		if d == '{' {
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		if err := skipValue(dec, levels-1); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// tokenKind names a JSON token's kind for a message, never its text (which
// is the server's).
func tokenKind(t json.Token) string {
	switch t.(type) {
	case json.Delim:
		return "a bracket"
	case string:
		return "a string"
	case nil:
		return "null"
	}
	return "a scalar"
}

// skipJSON takes any JSON value and keeps nothing.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

var servedPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/slurm/v0\.0\.(\d+)/`) })

func listVersions(served map[apiVersion]bool) string {
	var l []string
	for v := range served {
		l = append(l, v.String())
	}
	if len(l) == 0 {
		return "none"
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

var releaseRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Slurm-(\d+\.\d+\.\d+)`) })

// slurmRelease reads the Slurm release from info.version: "Slurm-24.11.5&..."
// from 23.11 on; 22.05 puts the API version there, so nothing is known.
func slurmRelease(info string) string {
	if m := releaseRE().FindStringSubmatch(info); m != nil {
		return m[1]
	}
	return ""
}

// Remember implements backends.Rememberer: the API version in use, so that
// a later invoke of the same job (a retried or re-attaching pod) sends no
// discovery request. Nothing while none is known or when the URL pins one.
func (b *Backend) Remember() string {
	b.ver.mu.Lock()
	defer b.ver.mu.Unlock()
	if b.pinned != 0 || b.ver.v == 0 {
		return ""
	}
	return "api=" + b.ver.v.String()
}

// Recall implements backends.Rememberer. A memo this package cannot read
// (an older or newer bridge-runner's) is ignored: discovery runs as usual.
func (b *Backend) Recall(memo string) {
	m := rememberedAPI().FindStringSubmatch(memo)
	if m == nil {
		return
	}
	n, _ := strconv.Atoi(m[1])
	b.ver.mu.Lock()
	defer b.ver.mu.Unlock()
	if b.pinned == 0 && b.ver.v == 0 && apiVersion(n) >= minVersion {
		b.ver.v, b.ver.recalled = apiVersion(n), true
		b.log.Debug("slurmrestd API recalled from the record", "api", b.ver.v.String())
	}
}

// Discover implements backends.Discoverer: it asks slurmrestd which API
// it serves now, dropping the version known before (this backend's and
// the process's for the cluster), and returns the memo. A cluster's agent
// calls it once at its start and again when its queries are refused, so
// that the version it publishes follows an upgraded slurmrestd.
func (b *Backend) Discover(ctx context.Context) (string, error) {
	b.ver.mu.Lock()
	if b.pinned == 0 && b.ver.v != 0 {
		clusterVersionOf(b).forget(b.ver.v)
		b.ver.v, b.ver.release, b.ver.recalled = 0, "", false
	}
	b.ver.mu.Unlock()
	if _, err := b.version(ctx); err != nil {
		return "", err
	}
	return b.Remember(), nil
}

// forgetRecalled drops a recalled version after slurmrestd answered a
// path of it with a plain 404: it was upgraded since the memo was written
// and serves that version no more. It reports whether there was one to
// drop; the caller's error is then transient, and the retry discovers.
func (b *Backend) forgetRecalled() bool {
	b.ver.mu.Lock()
	defer b.ver.mu.Unlock()
	if !b.ver.recalled {
		return false
	}
	b.log.Info("slurmrestd no longer serves the API recalled; finding it again", "api", b.ver.v.String())
	clusterVersionOf(b).forget(b.ver.v)
	b.ver.v, b.ver.recalled = 0, false
	return true
}

var rememberedAPI = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^api=v0\.0\.(\d+)$`) })

// apiPath is the path of endpoint under the version in use; version must
// have succeeded before.
func (b *Backend) apiPath(endpoint string) string {
	b.ver.mu.Lock()
	v := b.ver.v
	b.ver.mu.Unlock()
	return "/slurm/" + v.String() + "/" + endpoint
}
