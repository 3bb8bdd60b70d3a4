package runner

import (
	"io"
	"os"
)

// MaxCredentialFileBytes caps a credential file: a token, key or password is
// short, and reading a huge file whole (a wrong mount) would cost the pod
// its memory for nothing.
const MaxCredentialFileBytes = 64 << 10

// readCredentialFile reads a credential file of at most
// MaxCredentialFileBytes; a larger one is a FaultCredentials naming the file
// (never its content).
func readCredentialFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCredentialFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxCredentialFileBytes {
		return nil, fault(FaultCredentials, "credentials", "%s is larger than %d KiB, which no credential is; mount the right Secret (one short value per key)",
			path, MaxCredentialFileBytes>>10)
	}
	return b, nil
}

// flag is the flag that sets the credentials directory, for messages.
func (c DirCredentials) flag() string {
	if c.Flag != "" {
		return c.Flag
	}
	return "--credentials-dir"
}
