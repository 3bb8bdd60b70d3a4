package slurm

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

	"github.com/bridge-runner/bridge-runner/backends"
)

// apiVersion is a slurmrestd OpenAPI plugin version v0.0.N, stored as N.
type apiVersion int

// The versions whose wire shapes this package knows. A pinned newer version
// is spoken like the newest known one.
const (
	minVersion apiVersion = 38
	maxVersion apiVersion = 43
)

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

var versionPath = regexp.MustCompile(`^(.*)/slurm/v0\.0\.(\d+)$`)

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
	if m := versionPath.FindStringSubmatch(path); m != nil {
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
	mu      sync.Mutex
	v       apiVersion
	release string // Slurm release, for messages
}

// version returns the API version to speak: the pinned one, or the highest
// one slurmrestd serves, found by probing ping for every known version at
// once (one round trip; a version whose plugin is not loaded is a text/plain
// 404). The answer is kept for the backend's life.
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
	type probe struct {
		v   apiVersion
		r   *response
		err error
	}
	n := int(maxVersion - minVersion + 1)
	results := make([]probe, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		v := maxVersion - apiVersion(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.do(ctx, http.MethodGet, "/slurm/"+v.String()+"/ping", nil)
			results[i] = probe{v, r, err}
		}()
	}
	wg.Wait()
	var failed []string
	for _, p := range results { // highest first
		switch {
		case p.err != nil:
			// Transient, unless also invalid: a certificate that does not
			// verify fails every version the same way.
			if errors.Is(p.err, backends.ErrTransient) && !errors.Is(p.err, backends.ErrInvalid) {
				failed = append(failed, p.err.Error())
				continue
			}
			return 0, p.err
		case p.r.status == http.StatusUnauthorized:
			return 0, b.authError(p.r)
		case p.r.status == http.StatusNotFound && !p.r.json:
			continue // plugin not loaded
		case p.r.status != http.StatusOK && !p.r.json:
			// A proxy's 502/503/504 or 429: slurmrestd did not answer.
			failed = append(failed, p.r.String())
			continue
		}
		if len(failed) > 0 {
			// A higher version may be served too; do not settle for less.
			return 0, backends.Transient(fmt.Errorf("finding slurmrestd's API version: %s", strings.Join(failed, "; ")))
		}
		b.ver.v, b.ver.release = p.v, p.r.env.Meta.release()
		b.log.Info("slurmrestd API found", "api", p.v.String(), "slurm", b.ver.release)
		return p.v, nil
	}
	if len(failed) > 0 {
		return 0, backends.Transient(fmt.Errorf("finding slurmrestd's API version: %s", strings.Join(failed, "; ")))
	}
	return 0, backends.Invalid("resourceURL", "%s serves none of the slurmrestd APIs %s..%s (every /slurm/vX/ping is 404); is it slurmrestd, started with -s openapi/...?", b.base, minVersion, maxVersion)
}

// apiPath is the path of endpoint under the version in use; version must
// have succeeded before.
func (b *Backend) apiPath(endpoint string) string {
	b.ver.mu.Lock()
	v := b.ver.v
	b.ver.mu.Unlock()
	return "/slurm/" + v.String() + "/" + endpoint
}
