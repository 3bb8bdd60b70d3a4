package httpx

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// constructorFile is the one file that may build an http.Client or an
// http.Transport.
const constructorFile = "backends/httpx/client.go"

// clientGoBuilders are client-go functions that build an HTTP client or
// transport of their own (without the redirect policy); the
// ...ForConfigAndClient forms, which take one of ours, are allowed.
var clientGoBuilders = map[string][]string{
	"k8s.io/client-go/rest":      {"RESTClientFor", "UnversionedRESTClientFor", "HTTPClientFor", "TransportFor"},
	"k8s.io/client-go/transport": {"New"},
}

// clientGoNewForConfig matches the generated constructors of every
// client-go client (kubernetes, dynamic, discovery, metadata, scale...).
var clientGoNewForConfig = regexp.MustCompile(`^New\w*ForConfig(OrDie)?$`)

// Every HTTP client and transport of the binary comes from this package's
// constructor, which carries the redirect, TLS, proxy and connection
// policy. The test walks the syntax of every non-test Go file of the module
// (test helpers under internal/test* aside) and fails on any other way to
// make one: an http.Client or http.Transport value (a literal, new(), a
// variable or field of that type), Go's default client or transport, its
// http.Get/Head/Post/PostForm, or a client-go constructor that builds its
// own.
func TestOneConstructorBuildsEveryHTTPClient(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || strings.HasPrefix(rel, "internal/test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		found = append(found, violations(t, path, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked %d Go files under %s: not the module", files, root)
	}
	for _, v := range found {
		t.Error(v)
	}
	if len(found) > 0 {
		t.Logf("build clients with httpx.NewClient over httpx.NewTransport (or NewObjectTransport, NewKubernetesTransport), in %s", constructorFile)
	}
}

// TestOneConstructorCheckFindsEachForm proves the check sees every form it
// is meant to refuse.
func TestOneConstructorCheckFindsEachForm(t *testing.T) {
	src := `package p

import (
	h "net/http"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/dynamic"
	"github.com/gorilla/websocket"
)

type s struct{ c h.Client }

var v h.Transport

func f(cfg *rest.Config) {
	_ = &h.Client{}
	_ = h.Transport{}
	_ = new(h.Client)
	_ = h.DefaultClient
	_ = h.DefaultTransport.(*h.Transport).Clone()
	h.Get("x")
	h.Post("x", "", nil)
	h.Head("x")
	h.PostForm("x", nil)
	kubernetes.NewForConfig(cfg)
	dynamic.NewForConfigOrDie(cfg)
	rest.RESTClientFor(cfg)
	rest.UnversionedRESTClientFor(cfg)
	rest.HTTPClientFor(cfg)
	rest.TransportFor(cfg)
	var ok *h.Client
	_ = ok
	rest.UnversionedRESTClientForConfigAndClient(cfg, ok)
	_ = websocket.Dialer{}
	_ = websocket.DefaultDialer
	var d *websocket.Dialer
	_ = d
}
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := violations(t, path, "p/p.go")
	if want := 19; len(got) != want {
		t.Fatalf("found %d forms, want %d:\n%s", len(got), want, strings.Join(got, "\n"))
	}
	if got := violations(t, path, constructorFile); len(got) != 13 {
		t.Fatalf("in %s only http.Client, http.Transport and websocket.Dialer values are allowed; found %d:\n%s", constructorFile, len(got), strings.Join(got, "\n"))
	}
}

// violations lists the ways the file at path (rel in the module) builds
// an HTTP client or transport outside the constructor.
func violations(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	imports := map[string]string{} // local name → import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var out []string
	report := func(n ast.Node, what string) {
		pos := fset.Position(n.Pos())
		out = append(out, rel+":"+strconv.Itoa(pos.Line)+": "+what)
	}
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		parent := ast.Node(nil)
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		stack = append(stack, n)
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if what := misuse(imports[pkg.Name], pkg.Name, sel.Sel.Name, parent, rel); what != "" {
			report(n, what)
		}
		return true
	})
	return out
}

// misuse says how the selector pkg.name (pkg imported from path), under
// parent in the file rel, builds a client outside the constructor ("" if
// it does not).
func misuse(path, pkg, name string, parent ast.Node, rel string) string {
	switch {
	case path == "net/http" && (name == "Client" || name == "Transport"):
		// A pointer to one is how clients are passed around; a
		// value of the type is a new one.
		if _, isPtr := parent.(*ast.StarExpr); !isPtr && rel != constructorFile {
			return "an http." + name + " built outside " + constructorFile
		}
	case path == "net/http" && slices.Contains([]string{"DefaultClient", "DefaultTransport", "Get", "Head", "Post", "PostForm"}, name):
		return "http." + name + " (Go's default client, without the redirect, TLS and connection policy)"
	case path == "github.com/gorilla/websocket" && name == "Dialer":
		if _, isPtr := parent.(*ast.StarExpr); !isPtr && rel != constructorFile {
			return "a websocket.Dialer built outside " + constructorFile + " (use httpx.NewWebSocketDialer: the client's TLS and proxy)"
		}
	case path == "github.com/gorilla/websocket" && name == "DefaultDialer":
		return "websocket.DefaultDialer (without the client's TLS settings)"
	case strings.HasPrefix(path, "k8s.io/client-go/") && (slices.Contains(clientGoBuilders[path], name) || clientGoNewForConfig.MatchString(name)):
		return pkg + "." + name + " (client-go builds its own HTTP client; use the ...ForConfigAndClient form with one of httpx's)"
	}
	return ""
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
