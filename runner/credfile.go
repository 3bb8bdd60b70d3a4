package runner

import (
	"errors"

	"github.com/bridge-runner/bridge-runner/record"
)

// MaxCredentialFileBytes caps a credential file: a token, key or password is
// short, and reading a huge file whole (a wrong mount) would cost the pod
// its memory for nothing.
const MaxCredentialFileBytes = 64 << 10

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
