package record

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/bridge-runner/bridge-runner/kube"
)

// LabelFollow lets one watch follow a step's record and its cluster's
// agent's heartbeat together: a step whose cluster has an agent watches
// both (a label selector "LabelFollow in (record, heartbeat)"), where a
// watch of each was two requests. A record gets it from Create, the
// heartbeat from its agent; either without it (a record IBM's operator or
// kubectl made, an older agent's heartbeat) is watched on its own. Events
// are told apart by the ConfigMap's name, so anyone who labels another
// ConfigMap alike adds only events the step ignores.
const LabelFollow = "bridge-runner.io/follow"

// FollowValue is a ConfigMap's name as the value of LabelFollow: the name
// itself when it is a valid label value (a cluster's name is one: the
// same characters, 63 at most), else a digest of it.
func FollowValue(name string) string {
	if name != "" && CheckCluster(name) == nil {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "d-" + hex.EncodeToString(sum[:20])
}

// Followed reports whether cm carries its LabelFollow.
func Followed(cm *kube.ConfigMap) bool {
	return cm != nil && cm.Labels[LabelFollow] == FollowValue(cm.Name)
}

// Followed reports whether the record as this store last saw it carries
// its LabelFollow (so that a watch by the label sees it).
func (s *ConfigMapStore) Followed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Followed(s.last)
}

// Saw takes a version of the record that a watch other than this store's
// own brought (one that follows the heartbeat too): the store remembers
// it as its newest, as its own watch's, and returns its record.
func (s *ConfigMapStore) Saw(cm *kube.ConfigMap) *Record { return s.seen(cm) }
