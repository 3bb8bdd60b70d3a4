package runner

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// clusterOf is the cluster of desc's (placed) target: its backend and URL,
// the credentials resolved for it (the target's directory, or the step's),
// the site's budget for its watcher, the API version the record learnt
// and the limits the process's steps learnt (Invoker.Clusters).
// Backend construction, placement's shared probes and the watcher take it;
// its identity (the watch group and its key) is the cluster package's.
func (r *run) clusterOf(desc *record.Description) (cluster.Cluster, error) {
	creds, err := resolveCredentials(r.Backend.Credentials, desc.CredentialsDir)
	if err != nil {
		return cluster.Cluster{}, err
	}
	spec := cluster.Spec{Backend: desc.Backend, URL: desc.ResourceURL, Credentials: creds, Budget: r.Watch.MaxRequestsPerSecond, Book: r.Clusters}
	if dc, ok := creds.(DirCredentials); ok {
		spec.CredentialText = credentialBytes(dc.Dir)
	}
	if r.rec != nil {
		spec.APIVersion = r.rec.Data[record.KeyBackendMemo]
	}
	return cluster.New(spec), nil
}

// ClusterKey is the key of the cluster's shared state as an agent holds
// it: the cluster's Key of backend, url and the files of the credentials
// directory dir, so that steps of the very same credentials verify what
// the agent writes.
func ClusterKey(backend, url, dir string) []byte {
	return cluster.New(cluster.Spec{Backend: backend, URL: url, Credentials: DirCredentials{Dir: dir}, CredentialText: credentialBytes(dir)}).Key()
}

// credentialBytes reads every credential file of dir (a mounted Secret:
// its dot-entries are the mount's own machinery) as cluster.CredentialText:
// the text a cluster's identity is derived from. A file that cannot be read
// as a credential (too large, no regular file) is left out.
func credentialBytes(dir string) []byte {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	files := make(map[string][]byte, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if v, err := readCredentialFile(filepath.Join(dir, e.Name())); err == nil {
			files[e.Name()] = v
		}
	}
	return cluster.CredentialText(files)
}
