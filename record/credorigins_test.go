package record

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCredentialURLPropertiesAreChecked walks every backend's source: a
// jobproperties field (a json-tagged string) or alias whose name says it
// is a place (URL, URI, endpoint, host, server) must be one that
// CredentialSends checks against the Secret's binding, so that the next
// backend's token_url cannot take the credentials past it.
func TestCredentialURLPropertiesAreChecked(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir("../backends", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		seen += checkPlaceFields(t, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no place-naming jobproperties field found; the walk is broken (quantum's iam_url is one)")
	}
}

var (
	placeName  = regexp.MustCompile(`(?i)url|uri|endpoint|host|server`)
	identifier = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`) // an alias's target is a property name, not a message
)

// checkPlaceFields fails t on each place-naming jobproperties field or
// alias of f that CredentialSends would not check, and counts the fields.
func checkPlaceFields(t *testing.T, fset *token.FileSet, f *ast.File) int {
	seen := 0
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			id, ok := n.Type.(*ast.Ident)
			if n.Tag == nil || !ok || id.Name != "string" {
				return true
			}
			tag, _ := strconv.Unquote(n.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" && placeName.MatchString(name) {
				seen++
				if !CredentialURLProperty(name) {
					t.Errorf("%s: the field %s names a place but CredentialSends would not check it against the Secret's binding", fset.Position(n.Pos()), name)
				}
			}
		case *ast.KeyValueExpr:
			k, ok1 := n.Key.(*ast.BasicLit)
			v, ok2 := n.Value.(*ast.BasicLit)
			if !ok1 || !ok2 || k.Kind != token.STRING || v.Kind != token.STRING {
				return true
			}
			ks, _ := strconv.Unquote(k.Value)
			vs, _ := strconv.Unquote(v.Value)
			if identifier.MatchString(vs) && CredentialURLProperty(vs) && !CredentialURLProperty(ks) {
				t.Errorf("%s: the alias %s of %s would not be checked against the Secret's binding", fset.Position(n.Pos()), ks, vs)
			}
		}
		return true
	})
	return seen
}

func TestBindingParseAndAllows(t *testing.T) {
	b, err := ParseBinding("https://Slurm.Example.org, ssh://login.example.org:2222\nhttp://127.0.0.1:8080/")
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]bool{
		"https://slurm.example.org:443/slurm/v0.0.40": true,
		"https://slurm.example.org:6820":              false,
		"http://slurm.example.org":                    false,
		"ssh://alice@login.example.org:2222":          true,
		"ssh://login.example.org":                     false,
		"http://127.0.0.1:8080/api":                   true,
		"http://127.0.0.1.evil.example:8080":          false,
		"https://slurm.example.org@evil.example":      false,
		"slurm.example.org":                           false,
	} {
		if got := b.Allows(url); got != want {
			t.Errorf("Allows(%s) = %v, want %v", url, got, want)
		}
	}
	for _, bad := range []string{"", "slurm.example.org:6820", "https://h/path", "https://user:pw@h", "https://h?q=1"} {
		if _, err := ParseBinding(bad); err == nil || !strings.HasPrefix(err.Error(), OriginsKey+":") {
			t.Errorf("ParseBinding(%q) = %v, want an error naming %s", bad, err, OriginsKey)
		}
	}
}
