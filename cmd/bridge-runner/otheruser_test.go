package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
)

// Another user of the cluster's nodes must not get what a job was given:
// the presigned URLs (which let their holder overwrite the job's log and
// outputs, and show the S3 access key id) nor the job's files. These tests
// run as root, make a second local user, and look as that user while a
// job runs.

const otherUserName = "bridgeother"

// otherUser is the uid and gid of a second local user, made if missing.
func otherUser(t *testing.T) (uint32, uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test makes a second local user and needs root (failing instead of skipping because CI is set)")
		}
		t.Skip("this test makes a second local user and needs root")
	}
	u, err := user.Lookup(otherUserName)
	if err != nil {
		out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", otherUserName).CombinedOutput()
		require.NoError(t, err, "useradd: %s", out)
		u, err = user.Lookup(otherUserName)
		require.NoError(t, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uint32(uid), uint32(gid)
}

// asOther runs a shell script as the other user, in root's chroot if root
// is set (the HTCondor pool's), and returns its output.
func asOther(t *testing.T, root, script string) (string, error) {
	t.Helper()
	uid, gid := otherUser(t)
	cmd := exec.Command("/bin/sh", "-c", script)
	if root != "" {
		cmd = exec.Command("chroot", fmt.Sprintf("--userspec=%d:%d", uid, gid), root, "/bin/sh", "-c", script)
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cmdlineScanner reads every process's command line, as the other user,
// until stopped, and returns what it found of the patterns (in a file, so
// that they are not on the scanner's own command line).
func cmdlineScanner(t *testing.T, patterns ...string) (stop func() string) {
	t.Helper()
	uid, gid := otherUser(t)
	f, err := os.CreateTemp("", "bridge-patterns-*")
	require.NoError(t, err)
	t.Cleanup(func() { os.Remove(f.Name()) })
	_, err = f.WriteString(strings.Join(patterns, "\n") + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chmod(f.Name(), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `while :; do grep -a -h -o -F -f "$0" /proc/[0-9]*/cmdline 2>/dev/null; sleep 0.01; done`, f.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	return func() string {
		cancel()
		_ = cmd.Wait()
		return out.String()
	}
}

// TestOtherUserSeesNoPresignedURL: a Slurm job (REST) that ships its log
// and stages its outputs out to presigned URLs. As another user of the
// node, every process's command line is read throughout: no signature, no
// access key id. The live-log URL lives the job's time limit plus an hour,
// not a week; the job's environment (which holds it) is its own.
func TestOtherUserSeesNoPresignedURL(t *testing.T) {
	clearEnv(t)
	otherUser(t)
	url, slurmCreds := slurmEnv(t)
	endpoint, access, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "other")
	stop := cmdlineScanner(t, "X-Amz-Signature", "X-Amz-Credential", access)
	state := t.TempDir()
	script := "#!/bin/sh\necho result > out.txt\nfor i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i; sleep 1; done\n"
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "other-user", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", slurmCreds, "--s3-credentials-dir", s3Creds,
		"--script", script, "--job-properties", `{"time_limit":5,"current_working_directory":"/tmp"}`,
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", bucket, "--s3-upload-files", "out.txt",
		"--update-interval", "1", "--log-interval", "1s")
	var expires, environ string
	deadline := time.Now().Add(time.Minute)
	for expires == "" && time.Now().Before(deadline) {
		expires, environ = shipURLExpires(t)
		time.Sleep(50 * time.Millisecond)
	}
	require.NotEmpty(t, expires, "no job process with BRIDGE_LOG_URL found: %s", out.String())
	assert.Equal(t, strconv.Itoa(int((5*time.Minute+time.Hour)/time.Second)), expires, "the live-log URL lives the time limit (5 min) plus an hour")
	if got, err := asOther(t, "", "cat "+environ); err == nil {
		t.Errorf("another user read the job's environment %s: %.100q", environ, got)
	}
	code := exitOf(cmd.Wait())
	found := stop()
	require.Equal(t, 0, code, out.String())
	assert.Contains(t, out.String(), "line 12")
	assert.Empty(t, found, "another user read presigned URLs or the access key id on a command line")
}

// shipURLExpires finds a job process whose environment holds
// BRIDGE_LOG_URL and returns the URL's X-Amz-Expires and the environ file.
func shipURLExpires(t *testing.T) (string, string) {
	dirs, _ := os.ReadDir("/proc")
	re := regexp.MustCompile(`BRIDGE_LOG_URL=[^\x00]*[?&]X-Amz-Expires=(\d+)`)
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		name := "/proc/" + d.Name() + "/environ"
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if m := re.FindSubmatch(b); m != nil {
			return string(m[1]), name
		}
	}
	return "", ""
}

// TestOtherUserCannotReadSSHJobFiles: on the HTCondor pool and the Slurm
// login node (over SSH), with the job directory in a world-readable place,
// another user can neither list the job's directory nor read its script,
// parameters or output while it runs, nor find its parameters on a command
// line (sbatch's, the login shell's).
func TestOtherUserCannotReadSSHJobFiles(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { testOtherUserSSHFiles(t, sys) })
	}
}

func testOtherUserSSHFiles(t *testing.T, sys sshSystem) {
	clearEnv(t)
	otherUser(t)
	srv := sys.srv(t)
	top := fmt.Sprintf("/tmp/bridge-other-%d", time.Now().UnixNano())
	state := t.TempDir()
	secret := fmt.Sprintf("param-secret-%d", time.Now().UnixNano())
	// invoke's own command line holds the parameters (as the test gives
	// them); the job's variable assignment must be on none.
	stop := cmdlineScanner(t, "BRIDGE_JOB_PARAMETERS=")
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "other-files", "--backend", sys.backend,
		"--resource-url", srv.URL+"/"+top, "--credentials-dir", srv.CredsDir,
		"--script", "#!/bin/sh\necho started\nsleep 20\n", "--job-parameters", `{"token":"`+secret+`"}`, "--update-interval", "1")
	t.Cleanup(func() {
		target, _ := sshexec.ParseURL(srv.URL)
		c := sshexec.New(target, testssh.Creds(t, srv.CredsDir), nil, sshexec.Options{})
		defer c.Close()
		_, _ = c.Run(context.Background(), sshexec.Cmd{Args: []string{"rm", "-rf", top}})
	})
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "started") {
		require.True(t, time.Now().Before(deadline), "the job did not start: %s", out.String())
		time.Sleep(200 * time.Millisecond)
	}
	rec, err := record.NewFileStore(state, "other-files").Get(context.Background())
	require.NoError(t, err)
	dir := path.Join(top, rec.Data[record.KeyKey])
	files := []string{"job.out", "job.env"}
	if sys.backend != "slurm" {
		files = append(files, "job.sh", "parameters.json")
	}
	if got, err := asOther(t, srv.Root, "ls "+dir); err == nil {
		t.Errorf("another user listed the job's directory %s: %s", dir, got)
	}
	for _, f := range files {
		if got, err := asOther(t, srv.Root, "cat "+path.Join(dir, f)); err == nil || strings.Contains(got, secret) {
			t.Errorf("another user read %s: %q", f, got)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	assert.Empty(t, stop(), "another user read the job's parameters on a command line")
}

// TestOtherUserCannotReadSlurmRESTOutput: a Slurm job submitted over REST,
// working in a directory every user may list, leaves its output
// (slurm-<id>.out, made by slurmstepd) and the files it writes readable by
// its owner only. Before, both were 0644: a job submitted over REST got
// slurmd's umask, not its submitter's.
func TestOtherUserCannotReadSlurmRESTOutput(t *testing.T) {
	clearEnv(t)
	otherUser(t)
	for _, c := range slurmClusters(t) {
		// 24.11's and 26.05's nodes live in chroots.
		t.Run(c.release, func(t *testing.T) { testOtherUserRESTOutput(t, c.url, c.creds, c.root) })
	}
}

// testOtherUserRESTOutput runs the job in a new directory of the node's
// /tmp (root is the node's chroot, if any).
func testOtherUserRESTOutput(t *testing.T, url, creds, root string) {
	host, err := os.MkdirTemp(root+"/tmp", "bridge-rest-out-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(host) })
	require.NoError(t, os.Chmod(host, 0o1777))
	dir := strings.TrimPrefix(host, root)
	state := t.TempDir()
	marker := fmt.Sprintf("rest-output-%d", time.Now().UnixNano())
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "other-rest", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", creds, "--update-interval", "1",
		"--script", "#!/bin/sh\necho "+marker+"\necho "+marker+" > own.txt\n",
		"--job-properties", `{"time_limit":5,"current_working_directory":"`+dir+`"}`)
	require.Equal(t, 0, exitOf(cmd.Wait()), out.String())
	rec, err := record.NewFileStore(state, "other-rest").Get(context.Background())
	require.NoError(t, err)
	files := []string{path.Join(dir, "slurm-"+rec.Data[record.KeyID]+".out"), path.Join(dir, "own.txt")}
	for _, f := range files {
		fi, err := os.Stat(root + f)
		require.NoError(t, err, "the job wrote no %s: %s", f, out.String())
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: another user may read it", f, fi.Mode().Perm())
		if got, err := asOther(t, root, "cat "+f); err == nil || strings.Contains(got, marker) {
			t.Errorf("another user read %s: %q", f, got)
		}
	}
}

// TestSSHJobFilesAreOwnerOnly: after a job ends on the HTCondor pool or the
// Slurm login node (over SSH), every file in its directory (what invoke
// wrote, what the scheduler wrote: output, error, event log, and what the
// job wrote itself) is its owner's only, even if the directory were opened
// to others; and another user reads none of them.
func TestSSHJobFilesAreOwnerOnly(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { testSSHJobFileModes(t, sys) })
	}
}

func testSSHJobFileModes(t *testing.T, sys sshSystem) {
	clearEnv(t)
	otherUser(t)
	srv := sys.srv(t)
	top := fmt.Sprintf("/tmp/bridge-modes-%d", time.Now().UnixNano())
	state := t.TempDir()
	marker := fmt.Sprintf("modes-%d", time.Now().UnixNano())
	t.Cleanup(func() { os.RemoveAll(srv.Root + top) })
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "modes", "--backend", sys.backend,
		"--resource-url", srv.URL+"/"+top, "--credentials-dir", srv.CredsDir, "--update-interval", "1",
		"--script", "#!/bin/sh\necho "+marker+"\necho "+marker+" >&2\necho "+marker+" > own.txt\n")
	require.Equal(t, 0, exitOf(cmd.Wait()), out.String())
	rec, err := record.NewFileStore(state, "modes").Get(context.Background())
	require.NoError(t, err)
	dir := path.Join(top, rec.Data[record.KeyKey])
	var seen []string
	err = filepath.WalkDir(srv.Root+dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		seen = append(seen, d.Name())
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: another user may read it", strings.TrimPrefix(p, srv.Root), fi.Mode().Perm())
		if !d.IsDir() {
			if got, err := asOther(t, srv.Root, "cat "+strings.TrimPrefix(p, srv.Root)); err == nil || strings.Contains(got, marker) {
				t.Errorf("another user read %s: %q", p, got)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Contains(t, seen, "own.txt", "the job's own file is not in its directory: %v", seen)
	assert.Contains(t, seen, "job.out", "no output in the job's directory: %v", seen)
}
