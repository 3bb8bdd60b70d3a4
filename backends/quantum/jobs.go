package quantum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

func notFound(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ae, backends.ErrNotFound)
	}
	return err
}

// Cancel cancels the job; a job that has ended is fine.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !validJobID(id) {
		return fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	_, err := b.do(ctx, http.MethodPost, "/jobs/"+id+"/cancel", nil, nil)
	if err == nil {
		return nil
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.status == http.StatusNotFound || ae.status >= 500 || ae.status == http.StatusTooManyRequests ||
		ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden {
		return notFound(err)
	}
	if st, serr := b.Status(ctx, id); serr == nil && st.State.Final() {
		return nil
	}
	return err
}

// FindByKey returns the job tagged with key: GET /jobs?tags=<key>, checked
// again here.
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if !validKey(key) {
		return "", nil
	}
	buf, err := b.do(ctx, http.MethodGet, "/jobs", url.Values{"tags": {key}, "limit": {"50"}, "exclude_params": {"true"}}, nil)
	if err != nil {
		return "", err
	}
	var list struct {
		Jobs []jobResponse `json:"jobs"`
	}
	if len(bytes.TrimSpace(buf)) > 0 && bytes.TrimSpace(buf)[0] == '[' {
		err = json.Unmarshal(buf, &list.Jobs)
	} else {
		err = json.Unmarshal(buf, &list)
	}
	if err != nil {
		return "", fmt.Errorf("GET /jobs: cannot read the answer: %w", err)
	}
	var found []jobResponse
	for _, j := range list.Jobs {
		for _, t := range j.Tags {
			if t == key && validJobID(j.ID) {
				found = append(found, j)
				break
			}
		}
	}
	if len(found) == 0 {
		return "", nil
	}
	sort.SliceStable(found, func(i, k int) bool { return found[i].Created < found[k].Created })
	if len(found) > 1 {
		ids := make([]string, len(found))
		for i, j := range found {
			ids[i] = j.ID
		}
		b.log.Warn("several IBM Quantum jobs carry this idempotency key; adopting the first", "key", key, "jobs", strings.Join(ids, ","), "adopted", found[0].ID)
	}
	return found[0].ID, nil
}

// FetchOutput writes one of Outputs: "results", "logs" or "metrics".
func (b *Backend) FetchOutput(ctx context.Context, id, name string, w io.Writer) error {
	if !validJobID(id) {
		return fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	switch name {
	case "results", "logs", "metrics":
	default:
		return backends.Invalid("s3upload.files", "the quantum backend offers %s, not %q", strings.Join(Outputs, ", "), name)
	}
	resp, err := b.open(ctx, http.MethodGet, "/jobs/"+id+"/"+name, nil, nil)
	if err != nil {
		return notFound(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return backends.Transient(fmt.Errorf("GET /jobs/%s/%s: %w", id, name, err))
	}
	return nil
}
