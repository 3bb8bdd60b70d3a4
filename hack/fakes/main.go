// Command fakes starts the fake LSF Application Center or IBM Quantum
// service that the backends' tests use, so that a person can try the lsf
// and quantum backends end to end without a cluster or an IBM account:
//
//	go run ./hack/fakes lsf --addr 127.0.0.1:8470
//	go run ./hack/fakes quantum --addr 127.0.0.1:8471
//
// It writes the fake's credentials into a directory (--dir, else a new
// temporary one), prints the environment and the invoke command that use
// them, and serves until interrupted. Jobs run to DONE (Completed) on their
// own after --run-for; the fakes run no command. It is not part of the
// bridge-runner binary. It listens on a loopback address, or on one of
// this machine's own: hack/e2e.sh serves both fakes on the node's address,
// where the e2e suite's pods run the shipped LSF and Quantum examples.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
)

// exitUsage is the exit code for bad arguments, as bridge-runner's.
const exitUsage = 2

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakes:", err)
		os.Exit(exitUsage)
	}
}

// fake is one started fake: where it answers and what its credentials are.
type fake struct {
	url, backend string
	creds        map[string]string // the credentials Secret's keys
	props        string            // --job-properties of the example invoke
	script       string            // --script of the example invoke, for printf in sh's single quotes
	close        func()
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "lsf" && args[0] != "quantum") {
		return errors.New("say which fake to start: lsf or quantum (e.g. go run ./hack/fakes lsf --addr 127.0.0.1:8470)")
	}
	fs := flag.NewFlagSet("fakes "+args[0], flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on: loopback, or one of this machine's own (port 0: any free port)")
	dir := fs.String("dir", "", "directory to write the credentials into (default: a new temporary directory)")
	runFor := fs.Duration("run-for", 3*time.Second, "how long a job runs before it is DONE")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := ownAddress(*addr); err != nil {
		return err
	}
	if *runFor <= 0 {
		return errors.New("--run-for must be positive, e.g. 3s")
	}
	f, err := start(args[0], *addr, *runFor)
	if err != nil {
		return err
	}
	defer f.close()
	credsDir, err := writeCreds(*dir, f.creds)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# the fake %s answers at %s until interrupted (Ctrl-C)\n", f.backend, f.url)
	fmt.Fprintf(stdout, "export BRIDGE_FAKE_BACKEND=%s\nexport BRIDGE_FAKE_URL=%s\nexport BRIDGE_FAKE_CREDENTIALS=%s\n", f.backend, f.url, credsDir)
	fmt.Fprintf(stdout, "# try it:\n# bridge-runner invoke --state-dir ${TMPDIR:-/tmp}/try-%[1]s --job-name try-%[1]s --backend $BRIDGE_FAKE_BACKEND "+
		"--resource-url $BRIDGE_FAKE_URL --credentials-dir $BRIDGE_FAKE_CREDENTIALS --job-properties '%[2]s' --script \"$(printf '%[3]s')\"\n", f.backend, f.props, f.script)
	if fl, ok := stdout.(interface{ Sync() error }); ok {
		_ = fl.Sync()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// ownAddress refuses an address that is not this machine's: a loopback
// one, or one of its interfaces' (the node's own address, where the e2e
// suite's pods reach it, hack/e2e.sh). The fakes accept a password written
// in this program and run no command; they are never served elsewhere.
func ownAddress(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err == nil {
		var ip netip.Addr
		if ip, err = netip.ParseAddr(host); err == nil && !ip.IsLoopback() && !interfaceAddr(ip) {
			err = errors.New("neither a loopback address nor one of this machine's")
		}
	}
	if err != nil {
		return fmt.Errorf("--addr %q: %v; give a loopback host:port such as 127.0.0.1:8470, or one of this machine's own addresses", addr, err)
	}
	return nil
}

// interfaceAddr says whether ip is assigned to one of this machine's
// network interfaces.
func interfaceAddr(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == ip.Unmap() {
			return true
		}
	}
	return false
}

func start(which, addr string, runFor time.Duration) (*fake, error) {
	if which == "lsf" {
		s, err := fakelsf.Listen(addr, runFor)
		if err != nil {
			return nil, err
		}
		return &fake{url: s.URL, backend: "lsf", creds: map[string]string{"username": s.User, "password": s.Pass},
			props: `{}`, script: `#!/bin/sh\necho hello`, close: s.Close}, nil
	}
	s, err := fakequantum.Listen(addr, runFor)
	if err != nil {
		return nil, err
	}
	return &fake{url: s.URL + "/api/v1", backend: "quantum",
		// The keys of examples/quantum/secret.yaml, and the IAM the fake serves.
		creds:  map[string]string{"crn": s.CRN, "apikey": s.APIKey, "iam_url": s.URL + "/identity/token"},
		props:  `{"program_id":"sampler","backend":"ibm_torino"}`,
		script: `OPENQASM 3.0; include "stdgates.inc"; bit[2] c; h $0; cx $0,$1; c[0]=measure $0; c[1]=measure $1;`, close: s.Close}, nil
}

// writeCreds writes one file per key, as a mounted Secret, readable by
// its owner only.
func writeCreds(dir string, creds map[string]string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bridge-fake-credentials-"); err != nil {
			return "", err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for k, v := range creds {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}
