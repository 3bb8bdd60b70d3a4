package record

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// FileStore keeps the record as a JSON file. Writes are atomic (temp file and
// rename) and serialized with an flock on a sibling lock file, so several
// invokers on one machine get the same compare-and-swap semantics as the
// ConfigMap's resourceVersion.
type FileStore struct {
	Path string
	// PollEvery is how often Watch looks at the file (a stat, no read unless
	// it changed). A local stat is cheap; inotify would add a dependency for
	// nothing a user could notice.
	PollEvery time.Duration

	mu sync.Mutex // guards created
	// created is the UID of the record this store created (CreatedUID).
	created string
}

// NewFileStore returns the store for job in dir.
func NewFileStore(dir, job string) *FileStore {
	return &FileStore{Path: filepath.Join(dir, job+"-bridge-cm.json"), PollEvery: 100 * time.Millisecond}
}

type fileRecord struct {
	UID     string            `json:"uid"`
	Version int64             `json:"version"`
	Data    map[string]string `json:"data"`
}

func (s *FileStore) Describe() string { return "state file " + s.Path }

func (s *FileStore) lock() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		// MkdirAll says "file exists" for a symbolic link loop; Stat
		// names it (ELOOP).
		if _, serr := os.Stat(filepath.Dir(s.Path)); serr != nil {
			err = serr
		}
		return nil, fileFault(filepath.Dir(s.Path), err)
	}
	for {
		f, err := os.OpenFile(s.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fileFault(s.Path+".lock", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fileFault(s.Path+".lock", err)
		}
		// Delete removes the lock file while it holds the lock: whoever
		// waited on that file holds a lock nobody else sees, and must lock
		// the file that is there now.
		held, herr := f.Stat()
		now, nerr := os.Stat(s.Path + ".lock")
		if herr == nil && nerr == nil && os.SameFile(held, now) {
			return func() { s.unlock(f) }, nil
		}
		f.Close()
		if err := cmp.Or(herr, nerr); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fileFault(s.Path+".lock", err)
		}
	}
}

// unlock releases the lock; when there is no record (a Get that found
// none, a refused Create, a Delete) the lock file goes too, while still
// held, so that a refused or read-only command leaves no stray .lock beside
// no record. Whoever waits on the removed file locks the new one (see lock).
func (s *FileStore) unlock(f *os.File) {
	if _, err := os.Lstat(s.Path); errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(s.Path + ".lock")
	}
	f.Close()
}

// maxRecordFileBytes caps the state file: a record holds at most a
// ConfigMap's 1 MiB, which JSON escaping may grow a few times over.
const maxRecordFileBytes = 8 << 20

func (s *FileStore) read() (*fileRecord, error) {
	b, fi, err := ReadLocalFileInfo(s.Path, maxRecordFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoRecord
	}
	var le *LocalFileError
	if errors.As(err, &le) {
		return nil, &Fault{Class: FaultStateDir, Field: "state-dir", Err: err, Msg: le.Error() + "; the record must be a state file this command wrote: delete it, or point --state-dir elsewhere"}
	}
	if err != nil {
		return nil, fileFault(s.Path, err)
	}
	if err := trustedRecord(s.Path, fi); err != nil {
		return nil, err
	}
	var fr fileRecord
	if err := json.Unmarshal(b, &fr); err != nil {
		// Invalid, not transient: no retry can mend a file someone edited.
		return nil, backends.Invalid("state-dir", "%s is not a valid state file (%v); fix or delete it", s.Path, err)
	}
	if fr.Data == nil {
		fr.Data = map[string]string{}
	}
	return &fr, nil
}

func (s *FileStore) write(fr *fileRecord) error {
	b, err := json.MarshalIndent(fr, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		_ = os.Remove(tmp) // a full disk may have left half a file
		return fileFault(tmp, err)
	}
	return fileFault(s.Path, os.Rename(tmp, s.Path))
}

func (fr *fileRecord) record() *Record {
	return (&Record{UID: fr.UID, Version: strconv.FormatInt(fr.Version, 10), Data: fr.Data}).Clone()
}

func (s *FileStore) Get(context.Context) (*Record, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	fr, err := s.read()
	if err != nil {
		return nil, err
	}
	return fr.record(), nil
}

func (s *FileStore) Create(_ context.Context, data map[string]string) (*Record, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := s.read(); err == nil {
		return nil, ErrRecordExists
	} else if !errors.Is(err, ErrNoRecord) {
		return nil, err
	}
	uid := make([]byte, 16)
	_, _ = rand.Read(uid)
	fr := &fileRecord{UID: hex.EncodeToString(uid), Version: 1, Data: (&Record{Data: data}).Clone().Data}
	if err := s.write(fr); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.created = fr.UID
	s.mu.Unlock()
	return fr.record(), nil
}

func (s *FileStore) Update(_ context.Context, rec *Record) (*Record, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	fr, err := s.read()
	if err != nil {
		return nil, err
	}
	if fr.UID != rec.UID || strconv.FormatInt(fr.Version, 10) != rec.Version {
		return nil, ErrConflict
	}
	fr.Version++
	fr.Data = rec.Clone().Data
	if err := s.write(fr); err != nil {
		return nil, err
	}
	return fr.record(), nil
}

func (s *FileStore) Delete(context.Context) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fileFault(s.Path, err)
	}
	// The lock goes with the record (see unlock); nothing of the job stays.
	return nil
}

func (s *FileStore) Watch(ctx context.Context, from *Record) <-chan *Record {
	ch := make(chan *Record, 1)
	go func() {
		defer close(ch)
		last := ""
		if from != nil {
			last = from.UID + "/" + from.Version
		}
		t := time.NewTicker(s.PollEvery)
		defer t.Stop()
		var lastStamp string
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// Every write renames a new file into place, so the inode
			// changes even when two writes share one mtime tick.
			fi, err := os.Stat(s.Path)
			if err != nil {
				continue
			}
			stamp := fi.ModTime().String()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				stamp += "/" + strconv.FormatUint(st.Ino, 10)
			}
			if stamp == lastStamp {
				continue
			}
			lastStamp = stamp
			rec, err := s.Get(ctx)
			if err != nil || rec.UID+"/"+rec.Version == last {
				continue
			}
			last = rec.UID + "/" + rec.Version
			select {
			case ch <- rec:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// trustedRecord refuses a record that someone else could have written: one
// owned by another user, or writable by everyone. A record holds the job's
// id, its state and the kill flag; a forged one would make invoke follow,
// report or cancel a job that is not its own. Every record this command
// writes is its user's, mode 0600 (a rename, so a replaced file shows its
// writer as owner); group write is allowed, as Kubernetes' fsGroup adds it.
func trustedRecord(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return &Fault{Class: FaultStateDir, Field: "state-dir", Msg: fmt.Sprintf(
			"%s is owned by user %d, not by this command's user %d: another user could have written its job id, state or kill flag; "+
				"check it and chown it to user %d (or delete it), or point --state-dir at a directory of your own", path, st.Uid, uid, uid)}
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return &Fault{Class: FaultStateDir, Field: "state-dir", Msg: fmt.Sprintf(
			"%s is writable by every user (mode %04o): anyone could have written its job id, state or kill flag; check it and chmod o-w it (or delete it)",
			path, fi.Mode().Perm())}
	}
	return nil
}
