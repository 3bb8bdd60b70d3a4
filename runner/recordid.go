package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// idFingerprint binds a job id to the record (by UID) it was recorded in.
func idFingerprint(uid, id string) string {
	sum := sha256.Sum256([]byte("bridge-runner/id/" + uid + "\x00" + id))
	return hex.EncodeToString(sum[:12])
}

// checkRecordedID refuses a record whose id does not match its fingerprint.
// A record without a fingerprint (written before fingerprints, or by IBM's
// Bridge Operator) is taken as it is.
func checkRecordedID(rec *record.Record) error {
	id, fp := rec.Data[record.KeyID], rec.Data[record.KeyIDFingerprint]
	if id == "" || fp == "" || fp == idFingerprint(rec.UID, id) {
		return nil
	}
	return record.NewFault(record.FaultRecordID, record.KeyID, "%q is not the job this record submitted (%s does not match it: edited by hand?); "+
		"put back the id the backend returned, or delete the record (bridge-runner cleanup) and run the step again",
		id, record.KeyIDFingerprint)
}

// checkID refuses a recorded id that this record did not submit: one whose
// fingerprint does not match, or one without a fingerprint (put there by
// hand, or by an older version) that the backend does not know while the
// record says the job has not ended. Anything else is followed as before.
func (r *run) checkID(ctx context.Context, be backends.Backend, id string) error {
	if err := checkRecordedID(r.rec); err != nil {
		return err
	}
	if r.rec.Data[record.KeyIDFingerprint] != "" || backends.State(r.rec.Data[record.KeyJobStatus]).Final() {
		return nil
	}
	if _, err := be.Status(ctx, id); errors.Is(err, backends.ErrNotFound) {
		return record.NewFault(record.FaultRecordID, record.KeyID, "%q is not a job the backend knows, and nothing shows that bridge-runner recorded it "+
			"(no %s); put back the id the backend returned, or delete the record (bridge-runner cleanup) and run the step again",
			id, record.KeyIDFingerprint)
	}
	return nil
}
