package sshexec

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// TestErrorKindDropsServerText: the texts x/crypto/ssh and pkg/sftp build
// from what the server sent lose it; what is left names the kind, the
// documented code or the size.
func TestErrorKindDropsServerText(t *testing.T) {
	const say = "SERVER-SAID pass=hunter2"
	cases := []struct {
		err  error
		want string
	}{
		{&sftp.StatusError{Code: 4}, "SFTP status 4 (SSH_FX_FAILURE)"},
		{&sftp.StatusError{Code: 77}, "SFTP status 77 (not a version 3 code)"},
		{&ssh.OpenChannelError{Reason: ssh.Prohibited, Message: say}, "channel refused: administratively prohibited"},
		{&ssh.OpenChannelError{Reason: 99, Message: say}, "channel refused: reason 99"},
		{fmt.Errorf("ssh: handshake failed: ssh: disconnect, reason 2: %s", say), "the server disconnected (reason 2)"},
		{fmt.Errorf("ssh: handshake failed: ssh: no common algorithm for host key; we offered: [a], peer offered: [%s]", say), "ssh: no common algorithm for host key"},
		{fmt.Errorf("ssh: principal %q not in the set of valid principals for given certificate: %q", "h", say), "ssh: principal"},
		{fmt.Errorf("ssh: handshake failed: %w", errors.New(say)), "an SSH error (47 bytes of text, not shown)"},
	}
	for _, c := range cases {
		got := quiet(c.err).Error()
		if got != c.want {
			t.Errorf("quiet(%q) = %q, want %q", c.err, got, c.want)
		}
		if !errors.Is(quiet(c.err), c.err) {
			t.Errorf("quiet(%q) lost the error chain", c.err)
		}
	}
	if got := knownMethods([]string{"password", say, "keyboard-interactive"}); got != "password, keyboard-interactive, 1 unknown method(s), not shown" {
		t.Errorf("knownMethods = %q", got)
	}
}

// TestLibraryErrorsAreQuieted walks sshexec's sources: an error that may
// come from the SSH or SFTP library (err, last, or a .Error() call) reaches
// a message or log line only through quiet or errorKind. The functions in
// localOnly handle errors of local things (the agent's socket, the
// Secret's keys and known_hosts, the URL), never the server's.
func TestLibraryErrorsAreQuieted(t *testing.T) {
	localOnly := map[string]bool{"agentPath": true, "openAgent": true, "signer": true, "certSigner": true, "parseKnownHosts": true, "ParseURL": true}
	builders := map[string]bool{"Errorf": true, "Invalid": true, "refuseHostKey": true, "drop": true, "Info": true, "Warn": true, "Error": true, "Debug": true}
	safe := map[string]bool{"quiet": true, "errorKind": true, "unwrapNetError": true, "unwrapPathError": true, "len": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || localOnly[fn.Name.Name] {
				continue
			}
			checked++
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !builders[calleeName(call)] {
					return true
				}
				for _, arg := range call.Args {
					ast.Inspect(arg, func(n ast.Node) bool {
						switch x := n.(type) {
						case *ast.CallExpr:
							if safe[calleeName(x)] {
								return false
							}
							if calleeName(x) == "Error" && len(x.Args) == 0 {
								t.Errorf("%s: %s: an error's text in a message; use errorKind", fset.Position(x.Pos()), fn.Name.Name)
								return false
							}
						case *ast.Ident:
							if x.Name == "err" || x.Name == "last" {
								t.Errorf("%s: %s: an error in a message as is; wrap it in quiet", fset.Position(x.Pos()), fn.Name.Name)
							}
						}
						return true
					})
				}
				return false
			})
		}
	}
	if checked < 30 {
		t.Fatalf("the walk found %d functions", checked)
	}
}

func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}
