package sshexec_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// hostileSay is what the hostile server puts in every text it answers
// with: an SFTP status message, a refused channel's description.
const hostileSay = "HOSTILE-SERVER-TEXT secret=hunter2"

// hostileSSH is an SSH server on loopback that accepts any key and answers
// every SFTP request with a failure whose message is hostileSay; if
// refuseSessions, it refuses every session with that description instead.
func hostileSSH(t *testing.T, refuseSessions bool) (url string, creds *testutil.Creds) {
	t.Helper()
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveHostile(nc, cfg, refuseSessions)
			}()
		}
	}()
	addr := ln.Addr().String()
	creds = testutil.NewCreds(map[string]string{
		"ssh-privatekey": privateKeyPEM(t),
		"known_hosts":    "[127.0.0.1]:" + addr[strings.LastIndexByte(addr, ':')+1:] + " " + string(ssh.MarshalAuthorizedKey(signer.PublicKey())),
	})
	return "ssh://u@" + addr + "/jobs", creds
}

func serveHostile(nc net.Conn, cfg *ssh.ServerConfig, refuseSessions bool) {
	defer nc.Close()
	conn, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		if refuseSessions {
			_ = nch.Reject(ssh.ResourceShortage, hostileSay)
			continue
		}
		ch, chReqs, err := nch.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range chReqs {
				if req.Type != "subsystem" {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(true, nil)
				fail := hostileHandler{}
				srv := sftp.NewRequestServer(ch, sftp.Handlers{FileGet: fail, FilePut: fail, FileCmd: fail, FileList: fail})
				_ = srv.Serve()
				return
			}
		}()
	}
}

// hostileHandler fails every SFTP request with hostileSay as the status
// message (the request server sends an error's text as the message).
type hostileHandler struct{}

func (hostileHandler) Fileread(*sftp.Request) (io.ReaderAt, error) {
	return nil, errors.New(hostileSay)
}
func (hostileHandler) Filewrite(*sftp.Request) (io.WriterAt, error) {
	return nil, errors.New(hostileSay)
}
func (hostileHandler) Filecmd(*sftp.Request) error { return errors.New(hostileSay) }
func (hostileHandler) Filelist(*sftp.Request) (sftp.ListerAt, error) {
	return nil, errors.New(hostileSay)
}
func (hostileHandler) Lstat(*sftp.Request) (sftp.ListerAt, error) { return nil, errors.New(hostileSay) }
func (hostileHandler) RealPath(string) (string, error)            { return "", errors.New(hostileSay) }
func (hostileHandler) Readlink(string) (string, error)            { return "", errors.New(hostileSay) }
func (hostileHandler) OpenFile(*sftp.Request) (sftp.WriterAtReaderAt, error) {
	return nil, errors.New(hostileSay)
}

// TestNoServerTextInSSHErrors: an SSH server's own words (an SFTP status
// message, a refused session's description) reach no error message and no
// log line of sshexec; its errors say what failed, by kind and code.
func TestNoServerTextInSSHErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	opts := sshexec.Options{DialTimeout: 10 * time.Second, ReplyTimeout: 10 * time.Second}
	client := func(refuse bool) *sshexec.Client {
		url, creds := hostileSSH(t, refuse)
		target, err := sshexec.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := sshexec.New(target, creds, log, opts)
		t.Cleanup(func() { c.Close() })
		return c
	}
	sftpC, refusing := client(false), client(true)
	cases := map[string]func() error{
		"write": func() error {
			return sftpC.WriteFile(ctx, "/jobs/k/job.sh", strings.NewReader("x"), 0o600)
		},
		"read": func() error {
			_, err := sftpC.ReadFrom(ctx, "/jobs/k/job.out", 0, io.Discard)
			return err
		},
		"mkdir": func() error { return sftpC.MkdirAll(ctx, "/jobs/k", 0o700) },
		"realpath": func() error {
			_, err := sftpC.RealPath(ctx, ".")
			return err
		},
		"session refused": func() error {
			_, err := refusing.Run(ctx, sshexec.Cmd{Args: []string{"true"}})
			return err
		},
	}
	for name, do := range cases {
		err := do()
		if err == nil {
			t.Errorf("%s: the hostile server's failure was not reported", name)
			continue
		}
		if strings.Contains(err.Error(), "HOSTILE") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the server's text is in the message: %v", name, err)
		}
		if name != "session refused" && !strings.Contains(err.Error(), "SFTP status") {
			t.Errorf("%s: the message does not name the SFTP status: %v", name, err)
		}
	}
	if strings.Contains(logs.String(), "HOSTILE") || strings.Contains(logs.String(), "hunter2") {
		t.Errorf("the server's text is in the log:\n%s", logs.String())
	}
}
