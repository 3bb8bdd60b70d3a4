package backends

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// LocalFileError says why a file a user named (a credential, the record, a
// CA bundle, a kubeconfig, a local job's own files) cannot be read as one:
// it is not a regular file, or it is larger than the limit. Callers turn
// it into a fault naming their field.
type LocalFileError struct {
	Path, Problem string
}

func (e *LocalFileError) Error() string { return e.Path + " " + e.Problem }

// ReadLocalFile reads the regular file at path (symbolic links followed:
// a mounted Secret's files are links), at most max bytes, and returns what
// the opened file's fstat said (its owner and mode). Anything else is
// refused before a byte is read: a named pipe would block the open or the
// read until someone writes to it, a device such as /dev/zero never ends.
// The open is non-blocking for that reason; the type is checked on the
// opened file, so a file swapped after a check cannot slip through.
func ReadLocalFile(path string, max int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, &LocalFileError{Path: path, Problem: "is " + FileKind(fi.Mode()) + ", not a regular file"}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fi, err
	}
	if int64(len(b)) > max {
		return nil, fi, &LocalFileError{Path: path, Problem: fmt.Sprintf("is larger than %d KiB", max>>10)}
	}
	return b, fi, nil
}

// CheckLocalFile is for a file another library reads (client-go reads the
// kubeconfig): it refuses, as ReadLocalFile would, one that is no regular
// file or is larger than max, and lets a missing one through (that
// library says what is missing).
func CheckLocalFile(path string, max int64) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil
	case !fi.Mode().IsRegular():
		return &LocalFileError{Path: path, Problem: "is " + FileKind(fi.Mode()) + ", not a regular file"}
	case fi.Size() > max:
		return &LocalFileError{Path: path, Problem: fmt.Sprintf("is larger than %d KiB", max>>10)}
	}
	return nil
}

// FileKind names a file type for messages.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
