package backends

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
