package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends"
)

// sftpClient returns the SFTP session of the current connection, opening
// both if needed, and the connection it runs on.
func (c *Client) sftpClient(ctx context.Context) (*sftp.Client, *ssh.Client, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	if c.conn == conn && c.sftp != nil {
		sc := c.sftp
		c.mu.Unlock()
		return sc, conn, nil
	}
	c.mu.Unlock()
	var sc *sftp.Client
	err = c.await(ctx, conn, "opening SFTP", func() (err error) {
		sc, err = sftp.NewClient(conn)
		return err
	}, func() { go sc.Close() })
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, backends.ErrTransient)):
		return nil, nil, err
	case err != nil:
		c.drop(conn, "opening SFTP failed: "+errorKind(err))
		return nil, nil, backends.Transient(fmt.Errorf("sftp on %s: %w", c.target.Addr(), quiet(err)))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.conn != conn:
		go sc.Close()
		return nil, nil, backends.Transient(errors.New("ssh: connection dropped while opening SFTP"))
	case c.sftp != nil: // another caller opened one meanwhile
		go sc.Close()
		return c.sftp, conn, nil
	}
	c.sftp = sc
	return sc, conn, nil
}

// withSFTP runs fn with the SFTP session. SFTP calls can be neither
// cancelled nor given a deadline, so the connection is dropped, which ends
// them, when ctx ends first or when fn makes no progress (see progress)
// for ReplyTimeout.
func (c *Client) withSFTP(ctx context.Context, what string, fn func(*sftp.Client, *progress) error) error {
	sc, conn, err := c.sftpClient(ctx)
	if err != nil {
		return err
	}
	p := newProgress()
	done := make(chan error, 1)
	go func() { done <- fn(sc, p) }()
	tick := time.NewTicker(min(time.Second, c.opts.ReplyTimeout/4))
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-ctx.Done():
			c.detach(conn)
			return ctx.Err()
		case <-tick.C:
			if p.stalled(c.opts.ReplyTimeout) {
				c.silent(conn, c.opts.ReplyTimeout)
				return backends.Transient(fmt.Errorf("%s: no answer from %s for %s", what, c.target.Addr(), c.opts.ReplyTimeout))
			}
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", what, backends.ErrNotFound)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied on the login node", what)
	case isConnectionError(err):
		c.drop(conn, "sftp failed: "+errorKind(err))
		return backends.Transient(fmt.Errorf("%s: %w", what, quiet(err)))
	}
	return fmt.Errorf("%s: %w", what, quiet(err))
}

// progress is when an SFTP call last heard from the server. Time spent in
// the caller's own reader or writer (an S3 download feeding an upload, say)
// does not count as waiting for the server.
type progress struct {
	last    atomic.Int64 // unix nanoseconds
	outside atomic.Int32 // calls into the caller's reader or writer under way
}

func newProgress() *progress {
	p := &progress{}
	p.touch()
	return p
}

func (p *progress) touch() { p.last.Store(time.Now().UnixNano()) }

func (p *progress) stalled(limit time.Duration) bool {
	return p.outside.Load() == 0 && time.Since(time.Unix(0, p.last.Load())) > limit
}

// reader marks progress at each read of r: SFTP asks for more only as the
// server acknowledges what it sent.
func (p *progress) reader(r io.Reader) io.Reader {
	return readerFunc(func(b []byte) (int, error) {
		p.touch()
		p.outside.Add(1)
		defer p.outside.Add(-1)
		defer p.touch()
		return r.Read(b)
	})
}

// writer marks progress at each write to w: data came from the server.
func (p *progress) writer(w io.Writer) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		p.touch()
		p.outside.Add(1)
		defer p.outside.Add(-1)
		defer p.touch()
		return w.Write(b)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

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
func (c *Client) ReadFrom(ctx context.Context, name string, offset int64, w io.Writer) (next int64, err error) {
	defer func() { // a missing file is an answer too
		if errors.Is(err, backends.ErrNotFound) {
			c.count(backends.KindLog, nil)
		} else {
			c.count(backends.KindLog, err)
		}
	}()
	next = offset
	err = c.withSFTP(ctx, "reading "+name, func(sc *sftp.Client, p *progress) error {
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
		n, err := io.Copy(p.writer(w), f)
		next += n
		return err
	})
	return next, err
}

// WriteFile writes r to the remote file name (its missing directories are
// made, 0700), through a temporary name and a rename, so a reader never
// sees half a file. The file has mode before any byte is written. SFTP
// (as pkg/sftp speaks it) cannot give a mode at creation: the file exists
// for a moment with the server's default, so name's directory must be one
// other users cannot enter (a job's directory, made by MkdirAll 0700), or
// another user could open it then and read what follows.
func (c *Client) WriteFile(ctx context.Context, name string, r io.Reader, mode os.FileMode) (err error) {
	defer func() { c.count(backends.KindStage, err) }()
	return c.withSFTP(ctx, "writing "+name, func(sc *sftp.Client, p *progress) error {
		if err := mkdirPrivate(sc, path.Dir(name)); err != nil {
			return err
		}
		tmp := name + ".part"
		f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		if _, err := f.ReadFrom(p.reader(r)); err != nil {
			f.Close()
			_ = sc.Remove(tmp)
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return sc.PosixRename(tmp, name)
	})
}

// MkdirAll makes the remote directory dir and its missing parents (0700,
// see mkdirPrivate), and gives dir (not its existing parents, which may be
// shared) mode perm.
func (c *Client) MkdirAll(ctx context.Context, dir string, perm os.FileMode) error {
	return c.withSFTP(ctx, "making "+dir, func(sc *sftp.Client, _ *progress) error {
		if err := mkdirPrivate(sc, dir); err != nil {
			return err
		}
		return sc.Chmod(dir, perm|os.ModeDir)
	})
}

// mkdirPrivate makes dir and its missing parents, each made 0700 before
// the next is made in it (sftp's MkdirAll leaves them the server's
// default, often 0755: every user of the node could list a job's files).
// A directory that exists is left as it is.
func mkdirPrivate(sc *sftp.Client, dir string) error {
	fi, err := sc.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if parent := path.Dir(dir); parent != dir && parent != "." {
		if err := mkdirPrivate(sc, parent); err != nil {
			return err
		}
	}
	if err := sc.Mkdir(dir); err != nil {
		if fi, serr := sc.Stat(dir); serr == nil && fi.IsDir() {
			return nil // made meanwhile by another writer
		}
		return err
	}
	return sc.Chmod(dir, 0o700|os.ModeDir)
}

// RealPath resolves p on the login node ("." is the user's home).
func (c *Client) RealPath(ctx context.Context, p string) (string, error) {
	var out string
	err := c.withSFTP(ctx, "resolving "+p, func(sc *sftp.Client, _ *progress) (err error) {
		out, err = sc.RealPath(p)
		return err
	})
	return out, err
}
