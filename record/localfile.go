package record

import (
	"io/fs"

	"github.com/bridge-runner/bridge-runner/backends"
)

// LocalFileError is backends.LocalFileError: a local file a user named
// that is no regular file, or is too large.
type LocalFileError = backends.LocalFileError

// ReadLocalFile reads a file a user named, only if it is a regular file
// and at most max bytes: see backends.ReadLocalFile.
func ReadLocalFile(path string, max int64) ([]byte, error) {
	b, _, err := backends.ReadLocalFile(path, max)
	return b, err
}

// ReadLocalFileInfo is ReadLocalFile that also returns what the opened
// file's fstat said (its owner and mode, for the record's checks).
func ReadLocalFileInfo(path string, max int64) ([]byte, fs.FileInfo, error) {
	return backends.ReadLocalFile(path, max)
}

func checkLocalFile(path string, max int64) error { return backends.CheckLocalFile(path, max) }

// FileKind names a file type for messages.
func FileKind(m fs.FileMode) string { return backends.FileKind(m) }
