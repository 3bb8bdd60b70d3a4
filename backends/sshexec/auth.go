package sshexec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
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

// optionalValue returns the first of names present in creds, or "".
func optionalValue(creds backends.Credentials, names ...string) string {
	v, err := creds.Get(names...)
	if err != nil {
		return ""
	}
	return v
}

// prefixed are names with prefix before each ("jump1-" for a jump host's
// own credentials).
func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// keyPrefix is the prefix of the credentials hop n logs in with: "jumpN-"
// when the Secret holds jumpN-ssh-privatekey, else "" (the login node's key,
// certificate and passphrase, together: a jump host's key is never paired
// with the login node's certificate).
func keyPrefix(creds backends.Credentials, n int) string {
	if n == 0 {
		return ""
	}
	p := jumpPrefix(n)
	if _, err := creds.Get(prefixed(p, keyNames)...); err == nil {
		return p
	}
	return ""
}

// jumpPrefix is the prefix of jump host n's own credentials (1-based).
func jumpPrefix(n int) string { return "jump" + strconv.Itoa(n) + "-" }

// signer reads the private key named with prefix (and the certificate for
// it, when there is one) from the credentials. Re-read at every
// connection, so a rotated Secret is used from the next one on. With
// optional set, an absent key is (nil, nil): an agent may log in instead.
func signer(creds backends.Credentials, prefix string, optional bool) (ssh.Signer, error) {
	pem, err := creds.Get(prefixed(prefix, keyNames)...)
	if err != nil {
		if optional {
			return nil, nil
		}
		return nil, err
	}
	pem += "\n"
	var s ssh.Signer
	if pass := optionalValue(creds, prefixed(prefix, passphraseNames)...); pass != "" {
		s, err = ssh.ParsePrivateKeyWithPassphrase([]byte(pem), []byte(pass))
	} else {
		s, err = ssh.ParsePrivateKey([]byte(pem))
	}
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, backends.Invalid("credentials", "%sssh-privatekey is encrypted; add its passphrase to the Secret as %sssh-passphrase", prefix, prefix)
	case err != nil:
		return nil, backends.Invalid("credentials", "%sssh-privatekey is not a private key that SSH can use (%v); give an OpenSSH or PEM private key", prefix, err)
	}
	certText := optionalValue(creds, prefixed(prefix, certNames)...)
	if certText == "" {
		return s, nil
	}
	return certSigner(s, certText, prefix)
}

// certSigner pairs the key with its user certificate.
func certSigner(s ssh.Signer, certText, prefix string) (ssh.Signer, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(certText))
	if err != nil {
		return nil, backends.Invalid("credentials", "%sssh-certificate cannot be read (%v); give the -cert.pub file that ssh-keygen -s wrote", prefix, err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok || cert.CertType != ssh.UserCert {
		return nil, backends.Invalid("credentials", "%sssh-certificate is not a user certificate; give the -cert.pub file that ssh-keygen -s wrote", prefix)
	}
	if now := uint64(time.Now().Unix()); cert.ValidBefore != ssh.CertTimeInfinity && now >= cert.ValidBefore {
		return nil, fmt.Errorf("%w: the SSH certificate in %sssh-certificate expired at %s; have a new one signed and update it in the Secret",
			backends.ErrAuth, prefix, time.Unix(int64(cert.ValidBefore), 0).UTC().Format(time.RFC3339))
	}
	cs, err := ssh.NewCertSigner(cert, s)
	if err != nil {
		return nil, backends.Invalid("credentials", "%sssh-certificate does not belong to %sssh-privatekey (%v)", prefix, prefix, err)
	}
	return cs, nil
}

// hop is one hop of the route; it checks its host key against known_hosts from the
// credentials, or, for the login node with trust-first-use and no
// known_hosts, against the key first seen by this process.
type hop struct {
	user string // as the URL or proxyjump gives it; may be ""
	host string
	port int
	n    int  // jump host number (1 is dialled first); 0 for the login node
	tofu bool // trust-first-use was asked for (the login node only)

	mu     sync.Mutex
	pinned ssh.PublicKey // trust-first-use: the key seen first
}

func (h *hop) addr() string { return net.JoinHostPort(h.host, strconv.Itoa(h.port)) }

// name is the hop in messages: the login node by its address, as before
// jump hosts existed, and a jump host by its number and address.
func (h *hop) name() string {
	if h.n == 0 {
		return h.addr()
	}
	return fmt.Sprintf("jump host %d (%s)", h.n, h.addr())
}

// knownHosts is the known_hosts text for the hop: a jump host's own
// jumpN-known_hosts if the Secret has one, else the shared known_hosts,
// where each hop has its own line as in OpenSSH's file.
func (h *hop) knownHosts(creds backends.Credentials) string {
	if h.n > 0 {
		if k := optionalValue(creds, prefixed(jumpPrefix(h.n), knownHostsNames)...); k != "" {
			return k
		}
	}
	return optionalValue(creds, knownHostsNames...)
}

// callback returns the host key check for one connection and the host key
// algorithms to ask for (those known_hosts holds for the host, so that a
// server with several host keys shows the one we can check).
func (h *hop) callback(creds backends.Credentials) (ssh.HostKeyCallback, []string, error) {
	known := h.knownHosts(creds)
	switch {
	case known == "" && h.n > 0:
		return nil, nil, backends.Invalid("credentials", "no known_hosts in the credentials for %s: add its host key (e.g. the output of ssh-keyscan -p %d %s, checked against the site's published fingerprint) to known_hosts, or as %sknown_hosts; a jump host's key is always checked",
			h.name(), h.port, h.host, jumpPrefix(h.n))
	case known == "" && !h.tofu:
		return nil, nil, backends.Invalid("credentials", "no known_hosts in the credentials: add the login node's host key (e.g. the output of ssh-keyscan -p %d %s, checked against the site's published fingerprint) as known_hosts; only if you cannot, add ?hostkey=trust-first-use to resourceURL", h.port, h.host)
	case known == "":
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
		return hostKeyError(h, key, err)
	}
	return cb, algorithmsFor(check, h), nil
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
func hostKeyError(h *hop, key ssh.PublicKey, err error) error {
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
			h.name(), got, strings.Join(want, " or "))
	case errors.As(err, &ke):
		return refuseHostKey("known_hosts has no key for %s%s (it shows %s); add the host's key line to known_hosts in the Secret, after checking its fingerprint with the site",
			knownhosts.Normalize(h.addr()), jumpNote(h.n), got)
	case errors.As(err, &re):
		return refuseHostKey("the host key of %s (%s) is marked @revoked in known_hosts", h.name(), got)
	}
	return refuseHostKey("checking the host key of %s: %v", h.name(), quiet(err))
}

// jumpNote names, for jump host n, the key it may have of its own.
func jumpNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (jump host %d; its line may go in %sknown_hosts instead)", n, jumpPrefix(n))
}

// refuseHostKey is a host key that known_hosts does not accept: an
// ErrInvalid (exit 2), since retrying cannot help, and must not.
func refuseHostKey(format string, args ...any) error {
	return backends.Invalid("credentials", format, args...)
}

func (h *hop) trustFirstUse(_ string, _ net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pinned == nil {
		h.pinned = key
		return nil
	}
	if string(h.pinned.Marshal()) != string(key.Marshal()) {
		return refuseHostKey("the host key of %s changed from %s to %s during this run (trust-first-use)",
			h.addr(), ssh.FingerprintSHA256(h.pinned), ssh.FingerprintSHA256(key))
	}
	return nil
}

// algorithmsFor asks knownhosts which keys it holds for the target (it
// lists them when shown a key it does not know) and returns the host key
// algorithms that can show one of those.
func algorithmsFor(check ssh.HostKeyCallback, h *hop) []string {
	probe := probeKey{}
	addr := &net.TCPAddr{IP: net.ParseIP(h.host), Port: h.port}
	var ke *knownhosts.KeyError
	if err := check(h.addr(), addr, probe); !errors.As(err, &ke) {
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
// a missing or unreadable key, certificate or known_hosts of any hop, or a
// missing agent socket, is reported before anything is submitted.
func (c *Client) Check() error {
	agent, fromURL, agentErr := c.agentPath()
	if agentErr != nil && fromURL {
		return agentErr
	}
	for _, h := range c.route() {
		prefix := keyPrefix(c.creds, h.n)
		if _, err := signer(c.creds, prefix, agent != "" && agentErr == nil); err != nil {
			if _, kerr := c.creds.Get(prefixed(prefix, keyNames)...); kerr != nil {
				return noKey(err, agentErr, prefix)
			}
			return err
		}
		if _, _, err := h.callback(c.creds); err != nil {
			return err
		}
	}
	return nil
}
