package sshexec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Credential keys read from the credentials directory (the mounted Secret).
// ssh-privatekey is the key of Kubernetes' kubernetes.io/ssh-auth Secrets.
var (
	keyNames        = []string{"ssh-privatekey", "privatekey", "id_ed25519", "id_ecdsa", "id_rsa"}
	passphraseNames = []string{"ssh-passphrase", "passphrase"}
	certNames       = []string{"ssh-certificate", "certificate"}
	knownHostsNames = []string{"known_hosts", "ssh-known-hosts"}
	userNames       = []string{"username", "user"}
)

// optional returns the first of names present in creds, or "".
func optional(creds backends.Credentials, names ...string) string {
	v, err := creds.Get(names...)
	if err != nil {
		return ""
	}
	return v
}

// signer reads the private key (and the certificate for it, when there is
// one) from the credentials. Re-read at every connection, so a rotated
// Secret is used from the next one on.
func signer(creds backends.Credentials) (ssh.Signer, error) {
	pem, err := creds.Get(keyNames...)
	if err != nil {
		return nil, err
	}
	pem += "\n"
	var s ssh.Signer
	if pass := optional(creds, passphraseNames...); pass != "" {
		s, err = ssh.ParsePrivateKeyWithPassphrase([]byte(pem), []byte(pass))
	} else {
		s, err = ssh.ParsePrivateKey([]byte(pem))
	}
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, backends.Invalid("credentials", "ssh-privatekey is encrypted; add its passphrase to the Secret as ssh-passphrase")
	case err != nil:
		return nil, backends.Invalid("credentials", "ssh-privatekey is not a private key that SSH can use (%v); give an OpenSSH or PEM private key", err)
	}
	certText := optional(creds, certNames...)
	if certText == "" {
		return s, nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(certText))
	if err != nil {
		return nil, backends.Invalid("credentials", "ssh-certificate cannot be read (%v); give the -cert.pub file that ssh-keygen -s wrote", err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok || cert.CertType != ssh.UserCert {
		return nil, backends.Invalid("credentials", "ssh-certificate is not a user certificate; give the -cert.pub file that ssh-keygen -s wrote")
	}
	if now := uint64(time.Now().Unix()); cert.ValidBefore != ssh.CertTimeInfinity && now >= cert.ValidBefore {
		return nil, fmt.Errorf("%w: the SSH certificate expired at %s; have a new one signed and update ssh-certificate in the Secret",
			backends.ErrAuth, time.Unix(int64(cert.ValidBefore), 0).UTC().Format(time.RFC3339))
	}
	cs, err := ssh.NewCertSigner(cert, s)
	if err != nil {
		return nil, backends.Invalid("credentials", "ssh-certificate does not belong to ssh-privatekey (%v)", err)
	}
	return cs, nil
}

// hostKeys checks the server's host key against known_hosts from the
// credentials, or, with trust-first-use and no known_hosts, against the key
// first seen by this process.
type hostKeys struct {
	target Target
	mu     sync.Mutex
	pinned ssh.PublicKey // trust-first-use: the key seen first
}

// callback returns the host key check for one connection and the host key
// algorithms to ask for (those known_hosts holds for the host, so that a
// server with several host keys shows the one we can check).
func (h *hostKeys) callback(creds backends.Credentials) (ssh.HostKeyCallback, []string, error) {
	known := optional(creds, knownHostsNames...)
	if known == "" {
		if !h.target.TrustFirstUse {
			return nil, nil, backends.Invalid("credentials", "no known_hosts in the credentials: add the login node's host key (e.g. the output of ssh-keyscan -p %d %s, checked against the site's published fingerprint) as known_hosts; only if you cannot, add ?hostkey=trust-first-use to resourceURL", h.target.Port, h.target.Host)
		}
		return h.trustFirstUse, nil, nil
	}
	check, err := parseKnownHosts(known)
	if err != nil {
		return nil, nil, err
	}
	cb := func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := check(host, remote, key)
		if err == nil {
			return nil
		}
		return hostKeyError(h.target, key, err)
	}
	return cb, algorithmsFor(check, h.target), nil
}

// parseKnownHosts builds knownhosts' checker (it reads files only) from the
// text of a known_hosts file.
func parseKnownHosts(text string) (ssh.HostKeyCallback, error) {
	f, err := os.CreateTemp("", "known_hosts-*")
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(text + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	check, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, backends.Invalid("credentials", "known_hosts cannot be read (%s); give lines as ssh-keyscan prints them", strings.ReplaceAll(err.Error(), f.Name(), "known_hosts"))
	}
	return check, nil
}

// hostKeyError turns knownhosts' verdict into a refusal that says what to
// do. A key that does not match is not retried: it is exit 2, as the user
// must decide whether the server's key legitimately changed.
func hostKeyError(t Target, key ssh.PublicKey, err error) error {
	got := key.Type() + " " + ssh.FingerprintSHA256(key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &ke) && len(ke.Want) > 0:
		want := make([]string, len(ke.Want))
		for i, k := range ke.Want {
			want[i] = k.Key.Type() + " " + ssh.FingerprintSHA256(k.Key)
		}
		return refuseHostKey("the host key of %s is %s, but known_hosts expects %s: someone may be intercepting the connection, or the server's key changed; check with the site and update known_hosts in the Secret",
			t.Addr(), got, strings.Join(want, " or "))
	case errors.As(err, &ke):
		return refuseHostKey("known_hosts has no key for %s (it shows %s); add the host's key line to known_hosts in the Secret, after checking its fingerprint with the site",
			knownhosts.Normalize(t.Addr()), got)
	case errors.As(err, &re):
		return refuseHostKey("the host key of %s (%s) is marked @revoked in known_hosts", t.Addr(), got)
	}
	return refuseHostKey("checking the host key of %s: %v", t.Addr(), err)
}

// refuseHostKey is a host key that known_hosts does not accept: an
// ErrInvalid (exit 2), since retrying cannot help, and must not.
func refuseHostKey(format string, args ...any) error {
	return backends.Invalid("credentials", format, args...)
}

func (h *hostKeys) trustFirstUse(_ string, _ net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pinned == nil {
		h.pinned = key
		return nil
	}
	if string(h.pinned.Marshal()) != string(key.Marshal()) {
		return refuseHostKey("the host key of %s changed from %s to %s during this run (trust-first-use)",
			h.target.Addr(), ssh.FingerprintSHA256(h.pinned), ssh.FingerprintSHA256(key))
	}
	return nil
}

// algorithmsFor asks knownhosts which keys it holds for the target (it
// lists them when shown a key it does not know) and returns the host key
// algorithms that can show one of those.
func algorithmsFor(check ssh.HostKeyCallback, t Target) []string {
	probe := probeKey{}
	addr := &net.TCPAddr{IP: net.ParseIP(t.Host), Port: t.Port}
	var ke *knownhosts.KeyError
	if err := check(t.Addr(), addr, probe); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, s := range a {
			if !seen[s] {
				seen[s] = true
				algos = append(algos, s)
			}
		}
	}
	for _, k := range ke.Want {
		switch typ := k.Key.Type(); typ {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(typ)
		}
	}
	return algos
}

// probeKey is a public key no known_hosts line can hold.
type probeKey struct{}

func (probeKey) Type() string                        { return "bridge-runner-probe" }
func (probeKey) Marshal() []byte                     { return []byte("bridge-runner-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }

// Check reads the credentials as a connection would, without connecting:
// a missing or unreadable key, certificate or known_hosts is reported
// before anything is submitted.
func (c *Client) Check() error {
	if _, err := signer(c.creds); err != nil {
		return err
	}
	_, _, err := c.keys.callback(c.creds)
	return err
}
