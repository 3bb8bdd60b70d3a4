package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends"
)

// sftpClient returns the SFTP session of the current connection, opening
// both if needed.
func (c *Client) sftpClient(ctx context.Context) (*sftp.Client, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != conn {
		return nil, backends.Transient(errors.New("ssh: connection dropped while opening SFTP"))
	}
	if c.sftp != nil {
		return c.sftp, nil
	}
	sc, err := sftp.NewClient(conn)
	if err != nil {
		_ = c.dropLocked(conn)
		return nil, backends.Transient(fmt.Errorf("sftp on %s: %w", c.target.Addr(), err))
	}
	c.sftp = sc
	return sc, nil
}

// withSFTP runs fn with the SFTP session. SFTP calls cannot be cancelled,
// so when ctx ends first the connection is dropped, which ends them.
func (c *Client) withSFTP(ctx context.Context, what string, fn func(*sftp.Client) error) error {
	sc, err := c.sftpClient(ctx)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn(sc) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		c.mu.Lock()
		if c.sftp == sc {
			_ = c.dropLocked(c.conn)
		}
		c.mu.Unlock()
		<-done
		return ctx.Err()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", what, backends.ErrNotFound)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied on the login node", what)
	case isConnectionError(err):
		c.drop(c.currentConn(), "sftp failed: "+err.Error())
		return backends.Transient(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *Client) currentConn() *ssh.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// isConnectionError: the SFTP session or its connection broke (as opposed
// to the server refusing an operation with a status).
func isConnectionError(err error) bool {
	var st *sftp.StatusError
	if errors.As(err, &st) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sftp.ErrSSHFxConnectionLost) ||
		containsAny(err.Error(), "connection lost", "use of closed network connection", "broken pipe", "connection reset")
}

// ReadFrom copies the remote file at name from offset on to w and returns
// the offset after the last byte copied. A missing file is
// backends.ErrNotFound.
func (c *Client) ReadFrom(ctx context.Context, name string, offset int64, w io.Writer) (int64, error) {
	next := offset
	err := c.withSFTP(ctx, "reading "+name, func(sc *sftp.Client) error {
		f, err := sc.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if offset > 0 {
			st, err := f.Stat()
			if err != nil {
				return err
			}
			if st.Size() < offset { // truncated or replaced: start over
				offset, next = 0, 0
			}
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				return err
			}
		}
		n, err := io.Copy(w, f)
		next += n
		return err
	})
	return next, err
}

// WriteFile writes r to the remote file name (its directory is made),
// through a temporary name and a rename, so a reader never sees half a file.
func (c *Client) WriteFile(ctx context.Context, name string, r io.Reader, mode os.FileMode) error {
	return c.withSFTP(ctx, "writing "+name, func(sc *sftp.Client) error {
		if dir := path.Dir(name); dir != "." && dir != "/" {
			if err := sc.MkdirAll(dir); err != nil {
				return err
			}
		}
		tmp := name + ".part"
		f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if _, err := f.ReadFrom(r); err != nil {
			f.Close()
			_ = sc.Remove(tmp)
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := sc.Chmod(tmp, mode); err != nil {
			return err
		}
		return sc.PosixRename(tmp, name)
	})
}

// MkdirAll makes the remote directory dir and its parents.
func (c *Client) MkdirAll(ctx context.Context, dir string) error {
	return c.withSFTP(ctx, "making "+dir, func(sc *sftp.Client) error { return sc.MkdirAll(dir) })
}

// RealPath resolves p on the login node ("." is the user's home).
func (c *Client) RealPath(ctx context.Context, p string) (string, error) {
	var out string
	err := c.withSFTP(ctx, "resolving "+p, func(sc *sftp.Client) (err error) {
		out, err = sc.RealPath(p)
		return err
	})
	return out, err
}
