package htcondor

// Queries is the number of condor_q and condor_history commands the
// backend has run.
func (b *Backend) Queries() int64 { return b.queries.Load() }

// EndEvent is the event log's pattern of job id's end.
var EndEvent = endEvent

// ReviewedHoldCodes is the highest hold code the package has a category for.
const ReviewedHoldCodes = reviewedHoldCodes
