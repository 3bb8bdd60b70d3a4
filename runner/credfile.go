package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// MaxCredentialFileBytes caps a credential file (cluster's: the identity
// leaves out what cannot be read as a credential).
const MaxCredentialFileBytes = cluster.MaxCredentialFileBytes

// readCredentialFile reads a credential file of at most
// MaxCredentialFileBytes; a larger one, or one that is no regular file (a
// FIFO, a device), is a FaultCredentials naming the file (never its content).
func readCredentialFile(path string) ([]byte, error) {
	b, err := record.ReadLocalFile(path, MaxCredentialFileBytes)
	var le *record.LocalFileError
	if errors.As(err, &le) {
		return nil, record.NewFault(record.FaultCredentials, "credentials", "%s; mount the right Secret (one short value per key, each a regular file)", le)
	}
	return b, err
}

// flag is the flag that sets the credentials directory, for messages.
func (c DirCredentials) flag() string {
	if c.Flag != "" {
		return c.Flag
	}
	return "--credentials-dir"
}

// checkBindings refuses, before any request, to send a credentials
// directory to an origin its Secret's owner did not bind it to
// (record.OriginsKey): every URL of the description that a directory's
// credentials reach (each place's resourceURL and credential URLs of its
// jobproperties, the S3 endpoint) is checked against the binding of that
// directory, found by its real path, so "." or the step's directory spelt
// absolutely is the step's own. A directory without a binding is the
// user's own files, as before: its resourceURLs share one origin (the
// record's rule, checkCredentialOrigins, now by real directory), and a
// warning says that it is unbound. A target's directory inside the pod's
// own identity (its ServiceAccount token) is refused, symlinks resolved.
func (r *run) checkBindings(desc *record.Description) error {
	type dirSend struct {
		record.Send
		real string // the directory's real path
	}
	var sends []dirSend
	for _, s := range record.CredentialSends(desc) {
		creds, err := resolveCredentials(r.Backend.Credentials, s.Dir)
		if err != nil {
			return err
		}
		dc, ok := creds.(DirCredentials)
		if !ok || dc.Dir == "" {
			continue // credentials that are no mounted directory (a test's map)
		}
		real := realDir(dc.Dir)
		if !record.StepCredentials(s.Dir) && record.IdentityDir(real) {
			return backends.Invalid(s.Place+".credentials", "is %s, where the pod's own identity (its ServiceAccount token) is mounted, which never goes to a target; "+
				"mount the target's Secret elsewhere and name that directory", s.Dir)
		}
		sends = append(sends, dirSend{s, real})
	}
	if desc.UsesS3() && r.S3.CredentialsDir != "" {
		s := record.Send{Field: "s3.endpoint", Dir: r.S3.CredentialsDir, URL: record.S3URL(desc.S3.Endpoint, desc.S3.Secure)}
		sends = append(sends, dirSend{s, realDir(r.S3.CredentialsDir)})
	}
	bindings := map[string]record.Binding{}
	unboundOrigin := map[string]string{} // real dir -> the one origin of its resourceURLs
	for _, s := range sends {
		b, seen := bindings[s.real]
		if !seen {
			var err error
			if b, err = readBinding(s.real); err != nil {
				return err
			}
			bindings[s.real] = b
			if b == nil {
				r.Log.Warn("the credentials directory has no origin binding: its Secret's owner lists where it may be sent in the key "+record.OriginsKey+
					" (required for Secrets that BridgeJobs use)", "dir", s.real)
			}
		}
		origin, ok := record.CanonicalOrigin(s.URL)
		if !ok {
			origin = record.Origin(s.URL)
		}
		switch {
		case b != nil && !b.Allows(s.URL):
			return backends.Invalid(s.Field, "would send the credentials in %s to %s, which their Secret's %s does not list (it lists %s); "+
				"use a Secret bound to that origin, or ask the Secret's owner to add it to %s", s.real, origin, record.OriginsKey, strings.Join(b, " "), record.OriginsKey)
		case b == nil && strings.HasSuffix(s.Field, "resourceURL"):
			if first, ok := unboundOrigin[s.real]; ok && first != origin {
				return backends.Invalid(s.Field, "would send the credentials in %s, given for %s, to %s as well; a Secret without %s goes to one origin only: "+
					"mount this place's own Secret and name its directory, or have the Secret's owner list both origins in %s", s.real, first, origin, record.OriginsKey, record.OriginsKey)
			}
			unboundOrigin[s.real] = origin
		}
	}
	return nil
}

// realDir is dir's real path (symlinks resolved), or dir cleaned when it
// cannot be resolved (missing: reading it will say so).
func realDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// readBinding reads dir's record.OriginsKey; nil when there is none.
func readBinding(dir string) (record.Binding, error) {
	p := filepath.Join(dir, record.OriginsKey)
	b, err := readCredentialFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bind, err := record.ParseBinding(string(b))
	var fe *backends.FieldError
	if errors.As(err, &fe) {
		return nil, backends.Invalid(record.OriginsKey, "in %s %s", dir, fe.Msg)
	}
	return bind, err
}
