package sshexec

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// quiet is err as a message, record or log may show it: by kind, code and
// size, never text the server chose. The SSH and SFTP libraries put the
// server's words in their errors (a disconnect's or a refused channel's
// description, an SFTP status message, the algorithms or principals it
// offers), and a hostile or chatty server may put anything there, a
// credential included. The error chain stays whole for errors.Is and As.
func quiet(err error) error {
	if err == nil {
		return nil
	}
	var q *quietError
	if errors.As(err, &q) && q == err {
		return err
	}
	return &quietError{msg: errorKind(err), err: err}
}

type quietError struct {
	msg string
	err error
}

func (e *quietError) Error() string { return e.msg }
func (e *quietError) Unwrap() error { return e.err }

var (
	disconnectReason = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`ssh: disconnect, reason (\d+)`) })
	noCommonAlgo     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`ssh: no common algorithm for ([a-z ]+)`) })
)

// quietPhrases are x/crypto/ssh and pkg/sftp messages, or their leading
// parts, that hold no server text; the phrase is all that is kept.
var quietPhrases = []string{
	"ssh: unable to authenticate", "ssh: overflow reading version string", "ssh: subsystem request failed",
	"ssh: unexpected message type", "ssh: MAC failure", "ssh: padding",
	"ssh: invalid packet length", "ssh: packet too large", "ssh: invalid MAC", "ssh: host key",
	"ssh: certificate", "ssh: cert", "ssh: principal", "ssh: no authorities", "ssh: signature",
	"sftp: unexpected packet", "connection lost", "use of closed network connection", "broken pipe",
	"connection reset by peer", "connection refused", "i/o timeout", "no route to host",
}

// errorKind describes err without the server's text (see quiet).
func errorKind(err error) string {
	var (
		q  *quietError
		st *sftp.StatusError
		oc *ssh.OpenChannelError
		ne *net.OpError
	)
	switch {
	case errors.As(err, &q):
		return q.msg
	case errors.As(err, &st):
		return fmt.Sprintf("SFTP status %d (%s)", st.Code, sftpStatusName(st.Code))
	case errors.As(err, &oc):
		return "channel refused: " + rejection(oc.Reason)
	case errors.As(err, &ne):
		// Our own dial: the addresses are the ones we dialled.
		return ne.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection"
	}
	msg := err.Error()
	if m := disconnectReason().FindStringSubmatch(msg); m != nil {
		return "the server disconnected (reason " + m[1] + ")"
	}
	if m := noCommonAlgo().FindStringSubmatch(msg); m != nil {
		return "ssh: no common algorithm for " + strings.TrimSpace(m[1])
	}
	for _, p := range quietPhrases {
		if strings.Contains(msg, p) {
			return p
		}
	}
	return fmt.Sprintf("an SSH error (%d bytes of text, not shown)", len(msg))
}

// sftpStatusName names the status codes of the SFTP draft (version 3,
// section 7); any other number is the server's own.
func sftpStatusName(code uint32) string {
	names := []string{"SSH_FX_OK", "SSH_FX_EOF", "SSH_FX_NO_SUCH_FILE", "SSH_FX_PERMISSION_DENIED", "SSH_FX_FAILURE",
		"SSH_FX_BAD_MESSAGE", "SSH_FX_NO_CONNECTION", "SSH_FX_CONNECTION_LOST", "SSH_FX_OP_UNSUPPORTED"}
	if int(code) < len(names) {
		return names[code]
	}
	return "not a version 3 code"
}

// rejection names an RFC 4254 channel-open failure code; RejectionReason's
// own String is fine for those four, but prints any other number as is too.
func rejection(r ssh.RejectionReason) string {
	switch r {
	case ssh.Prohibited, ssh.ConnectionFailed, ssh.UnknownChannelType, ssh.ResourceShortage:
		return r.String()
	}
	return fmt.Sprintf("reason %d", uint32(r))
}

// authMethods are the SSH authentication methods a message may name (RFC
// 4252 and the ones in common use); a server may offer any word.
var authMethods = []string{"publickey", "password", "keyboard-interactive", "hostbased", "gssapi-with-mic", "gssapi-keyex", "none"}

// knownMethods is offered as a message may show it: the known methods,
// and how many others.
func knownMethods(offered []string) string {
	var known []string
	other := 0
	for _, m := range offered {
		if slices.Contains(authMethods, m) {
			known = append(known, m)
		} else {
			other++
		}
	}
	if other > 0 {
		known = append(known, fmt.Sprintf("%d unknown method(s), not shown", other))
	}
	return strings.Join(known, ", ")
}
