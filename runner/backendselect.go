package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// description reads the job description from the record: it refuses
// unknown keys, logs the IBM spellings it read, chooses the backend (and
// records a chosen one, so that cleanup and retries need not choose again).
func (r *run) description(ctx context.Context) (*record.Description, error) {
	rep, err := record.CheckKeys(r.rec.Data)
	if err != nil {
		return nil, err
	}
	if len(rep.Aliased) > 0 {
		r.Log.Info("read IBM Bridge Operator spellings as bridge-runner keys", "keys", rep.Aliased)
	}
	if len(rep.Inert) > 0 {
		r.Log.Info("ignoring IBM Bridge Operator keys that mean nothing to bridge-runner", "keys", rep.Inert)
	}
	spec := record.SpecFromData(r.rec.Data)
	if strings.TrimSpace(spec.Targets) != "" {
		desc, err := spec.Parse()
		if err != nil {
			return nil, err
		}
		if err := r.checkBindings(desc); err != nil {
			return nil, err
		}
		return r.placed(ctx, desc)
	}
	name, why, err := record.SelectBackend(ctx, spec.Backend, r.BackendChoice, spec.ResourceURL, r.Registry.Names(), r.Backend.HTTPClient)
	if err != nil {
		return nil, err
	}
	if c := strings.TrimSpace(r.BackendChoice); c != "" && spec.Backend != "" && c != strings.TrimSpace(spec.Backend) {
		r.Log.Warn("the record's backend key wins over --backend", "record", spec.Backend, "given", c)
	}
	if spec.Backend == "" {
		r.Log.Info("backend chosen", "backend", name, "why", why)
		err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
			return r.update(ctx, func(d map[string]string) (bool, error) {
				if d["backend"] != "" {
					return false, nil
				}
				return record.Set(d, "backend", name), nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("recording backend %s in %s: %w", name, r.Store.Describe(), err)
		}
		spec.Backend = record.SpecFromData(r.rec.Data).Backend
	}
	desc, err := spec.Parse()
	if err != nil {
		return nil, err
	}
	if err := r.checkBindings(desc); err != nil {
		return nil, err
	}
	return desc, nil
}

// newBackend builds the backend the description names, at its resourceURL,
// and hands it the record's memo. invoke and cleanup both build theirs here,
// after description chose it.
func (r *run) newBackend(desc *record.Description) (backends.Backend, error) {
	c, err := r.clusterOf(desc)
	if err != nil {
		return nil, err
	}
	be, err := r.backendFor(c)
	if err != nil {
		return nil, err
	}
	r.recallMemo(be)
	if _, ok := be.(backends.ArraySubmitter); ok && desc.Array != nil {
		a := asArray(be, *desc.Array)
		// Its limit is the cluster's (asked once per cluster).
		a.cluster = c
		if r.rec != nil { // a chunked array is split as its submit fixed it
			a.size = recordedChunkSize(r.rec.Data[record.KeyArrayChunks])
		}
		if err := r.addPeers(a, desc); err != nil {
			closeBackend(a, r.Log)
			return nil, err
		}
		return a, nil
	}
	return be, nil
}

// buildBackend builds the description's backend with its target's
// credentials and nothing of the record.
func (r *run) buildBackend(desc *record.Description) (backends.Backend, error) {
	c, err := r.clusterOf(desc)
	if err != nil {
		return nil, err
	}
	return r.backendFor(c)
}

// backendFor builds the backend of cluster c: its system, at its URL, with
// the credentials bound to it.
func (r *run) backendFor(c cluster.Cluster) (backends.Backend, error) {
	cfg := r.Backend
	cfg.URL, cfg.Credentials = c.URL, c.Credentials
	cfg.Logger = r.Log.With("backend", c.Backend)
	return r.Registry.New(c.Backend, cfg)
}
