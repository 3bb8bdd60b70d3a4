package backends

import (
	"errors"
	"fmt"
)

// Sentinel errors that backends wrap so the runner can decide what to do
// without knowing any wire protocol.
var (
	// ErrInvalid: the job or configuration is wrong; retrying cannot help.
	ErrInvalid = errors.New("invalid job")
	// ErrTransient: a fault that a later retry may not see (5xx, 429,
	// connection refused, timeouts).
	ErrTransient = errors.New("temporary backend failure")
	// ErrNotFound: the backend does not know the job (any more).
	ErrNotFound = errors.New("job not found")
	// ErrAuth: the credentials were refused (expired or wrong token).
	ErrAuth = errors.New("credentials refused")
	// ErrExists: a job with this idempotency key already exists.
	ErrExists = errors.New("job already exists")
)

// Invalid returns an error wrapping ErrInvalid that names the offending field
// and says how to fix it.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// FieldError is an ErrInvalid that names the input field at fault.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Transient wraps err as ErrTransient (nil stays nil).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{kind: ErrTransient, err: err}
}

type wrapped struct {
	kind error
	err  error
}

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.kind, w.err} }
