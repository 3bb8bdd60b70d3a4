package record

import (
	"regexp"

	"github.com/bridge-runner/bridge-runner/backends"
)

// A record that names a cluster (KeyCluster, and the label LabelCluster
// that create-configmap and invoke put on its ConfigMap) is served by that
// cluster's agent: one long-lived process that asks the cluster for every
// such record's job in one batched query and tells the records what it saw.
const (
	KeyCluster   = "cluster"
	LabelCluster = "bridge-runner.io/cluster"
)

// The description's keys the agent reads to tell whether a record is of
// its cluster's backend and URL.
const (
	KeyBackend     = "backend"
	KeyResourceURL = "resourceURL"
)

// clusterRE: a cluster's name is a label value and part of a ConfigMap
// name (the agent's heartbeat, bridge-runner-agent-<cluster>): lowercase
// letters, digits, '-' and '.', beginning and ending alphanumeric.
var clusterRE = regexp.MustCompile(`^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// AgentConfigMap is the name of cluster's agent heartbeat ConfigMap. It is
// here, not in package runner, because the operator grants access to it by
// name and must not link runner.
func AgentConfigMap(cluster string) string { return "bridge-runner-agent-" + cluster }

// CheckCluster checks a cluster's name ("" is none, and fine).
func CheckCluster(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > 63 || !clusterRE.MatchString(name) {
		return backends.Invalid("cluster", "%q is not a cluster name; give at most 63 lowercase letters, digits, '-' or '.', beginning and ending with a letter or digit (a BridgeCluster's name)", name)
	}
	return nil
}
