package lsf

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// validID: LSF job ids are positive numbers (array jobs: 123[4]).
func validID(id string) bool {
	base, idx, arr := strings.Cut(id, "[")
	if arr && (!strings.HasSuffix(idx, "]") || !digits(strings.TrimSuffix(idx, "]"))) {
		return false
	}
	return digits(base) && strings.Trim(base, "0") != "" && len(base) <= 12
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jobEntries finds the job elements of a jobs answer, whatever their casing
// and wrapping.
func jobEntries(doc node) []node {
	if inner := firstMap(get(doc, "jobs")); inner != nil && get(doc, "job", "pseudoJob") == nil {
		doc = inner
	}
	return list(get(doc, "job", "pseudoJob"))
}

func entryID(e node) string { return str(get(e, "jobId", "id", "jobID")) }

// FindByKey lists the user's jobs named <key>* and returns the one whose
// name is the key or starts with "<key>-" (an array's elements give the
// array's id).
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if !validKey(key) {
		return "", nil
	}
	r := request{method: http.MethodGet, path: "/ws/jobs", query: url.Values{"jobname": {key + "*"}}, accept: "application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return "", nil // "No jobs that match the specified criteria were found."
	}
	if err != nil {
		return "", transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	var found []string
	for _, e := range jobEntries(doc) {
		name, id := str(get(e, "jobName", "name")), entryID(e)
		if base, n := element(e); n > 0 {
			// An array's element ("<id>[n]", named "<name>[n]") stands
			// for its array.
			name, id = strings.TrimSuffix(name, "["+strconv.Itoa(n)+"]"), base
		}
		if (name == key || strings.HasPrefix(name, key+"-")) && validID(id) && !slices.Contains(found, id) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	sort.Slice(found, func(i, j int) bool { return idNum(found[i]) < idNum(found[j]) })
	b.log.Warn("several LSF jobs carry this idempotency key; adopting the first", "key", key, "jobs", strings.Join(found, ","), "adopted", found[0])
	return found[0], nil
}

func idNum(id string) int64 {
	base, _, _ := strings.Cut(id, "[")
	n, _ := strconv.ParseInt(base, 10, 64)
	return n
}

type userCmd struct {
	XMLName xml.Name `xml:"UserCmd"`
	Cmd     string   `xml:"cmd"`
}

// Cancel kills the job: POST ws/jobs/kill (ids=ID), or, where that is not
// served, POST ws/userCmd with bkill. A job that has already ended is fine.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	b.mu.Lock()
	via := b.killVia
	b.mu.Unlock()
	var err error
	if via != "userCmd" {
		form := []byte(url.Values{"ids": {id}}.Encode())
		_, err = b.do(ctx, request{method: http.MethodPost, path: "/ws/jobs/kill", contentType: "application/x-www-form-urlencoded",
			accept: "application/json", body: func() (io.Reader, error) { return bytes.NewReader(form), nil }})
		if err == nil {
			b.setKillVia("jobs/kill")
			return nil
		}
		se := asStatus(err)
		if via != "" || se == nil || (se.status != http.StatusNotFound && se.status != http.StatusMethodNotAllowed) {
			return b.cancelFailed(ctx, id, err)
		}
	}
	x, _ := xml.Marshal(userCmd{Cmd: "bkill " + id})
	_, err = b.do(ctx, request{method: http.MethodPost, path: "/ws/userCmd", contentType: "application/xml",
		accept: "application/json", body: func() (io.Reader, error) { return bytes.NewReader(x), nil }})
	if err == nil {
		b.setKillVia("userCmd")
		return nil
	}
	return b.cancelFailed(ctx, id, err)
}

func (b *Backend) setKillVia(v string) {
	b.mu.Lock()
	b.killVia = v
	b.mu.Unlock()
}

// cancelFailed: a refused kill of a job that has ended is a success.
func (b *Backend) cancelFailed(ctx context.Context, id string, err error) error {
	if errors.Is(err, backends.ErrAuth) || ctx.Err() != nil {
		return err
	}
	st, serr := b.Status(ctx, id)
	if serr == nil && st.State.Final() {
		return nil
	}
	if errors.Is(serr, backends.ErrNotFound) {
		return fmt.Errorf("%v: %w", err, backends.ErrNotFound)
	}
	return transientOr(err)
}
