package backends

import "context"

// Rememberer is implemented by backends that learn something about the
// remote side before their first real request (Slurm: the REST API version
// slurmrestd serves) and can be handed it again by a later invoke of the
// same job, so that a retried or re-attaching pod sends no discovery
// requests. The runner keeps the memo in the job's record beside its state.
type Rememberer interface {
	// Remember returns what to keep, or "" while nothing is learnt yet. It
	// is not secret and must stay small (one record value).
	Remember() string
	// Recall hands back what an earlier Remember returned. A memo the
	// backend cannot use (another version's) is ignored.
	Recall(memo string)
}

// Discoverer is implemented by Rememberers that can learn their memo on
// demand, before any job needs it: a cluster's agent asks the remote side
// once (Slurm: which REST API it serves) and publishes the memo sealed in
// its heartbeat, so that the steps naming the cluster recall it instead of
// each asking again.
type Discoverer interface {
	Rememberer
	// Discover asks the remote side anew (whatever was learnt before is
	// dropped first) and returns the memo, "" when there is nothing to
	// learn (a version pinned by the URL, say).
	Discover(ctx context.Context) (string, error)
}
