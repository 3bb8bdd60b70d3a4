package runner

import "github.com/bridge-runner/bridge-runner/record"

import "github.com/bridge-runner/bridge-runner/backends"

// recallMemo hands the record's memo to the backend, if it remembers.
func (r *run) recallMemo(be backends.Backend) {
	rem, ok := be.(backends.Rememberer)
	if !ok {
		return
	}
	r.memo = rem
	if m := r.rec.Data[record.KeyBackendMemo]; m != "" {
		rem.Recall(m)
	}
}

// keepMemo adds the backend's memo to a record write that happens anyway
// (the job id, a state change): it never costs a request of its own.
func (r *run) keepMemo(d map[string]string) {
	if r.memo == nil {
		return
	}
	if m := r.memo.Remember(); m != "" {
		d[record.KeyBackendMemo] = m
	}
}
