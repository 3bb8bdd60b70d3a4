package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The Kubernetes client follows httpx's redirect policy: a bearer token
// (given inline or as a file) never reaches another origin after a 3xx,
// whatever the verb. client-go's own HTTP client (rest.HTTPClientFor)
// followed a 307 to another port with Authorization on the second hop.
func TestRedirectKeepsTokenAtItsOrigin(t *testing.T) {
	const token = "kube-bearer-token-9f1c"
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, r.Method+" "+r.URL.Path+": "+a)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`)
	}))
	defer other.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, how := range []string{"inline", "file"} {
			t.Run(fmt.Sprintf("%d/%s", status, how), func(t *testing.T) {
				var sawToken bool
				api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					sawToken = sawToken || r.Header.Get("Authorization") == "Bearer "+token
					mu.Unlock()
					http.Redirect(w, r, other.URL+r.URL.RequestURI(), status)
				}))
				defer api.Close()
				cfg := &rest.Config{Host: api.URL, Timeout: 10 * time.Second}
				if how == "inline" {
					cfg.BearerToken = token
				} else {
					cfg.BearerTokenFile = tokenFile
				}
				c, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cm := &ConfigMap{}
				calls := map[string]func() error{
					"get":    func() error { return c.Get(ctx, ConfigMaps, "ns", "x", cm) },
					"list":   func() error { return c.List(ctx, ConfigMaps, "ns", &metav1.ListOptions{}, &ConfigMapList{}) },
					"create": func() error { return c.Create(ctx, ConfigMaps, "ns", &ConfigMap{}, cm) },
					"update": func() error { return c.Update(ctx, ConfigMaps, "ns", "x", &ConfigMap{}, cm) },
					"patch":  func() error { return c.MergePatch(ctx, ConfigMaps, "ns", "x", []byte(`{}`), cm) },
					"delete": func() error { return c.Delete(ctx, ConfigMaps, "ns", "x", "") },
					"watch": func() error {
						w, err := c.WatchOne(ctx, ConfigMaps, "ns", "x", "")
						if err == nil {
							w.Stop()
						}
						return err
					},
				}
				for verb, call := range calls {
					err := call()
					if err == nil || !strings.Contains(err.Error(), "redirect refused") {
						t.Errorf("%s: err = %v, want a refused redirect", verb, err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !sawToken {
					t.Fatal("the API server never saw the token: the test proves nothing")
				}
				if len(leaked) > 0 {
					t.Fatalf("the token reached another origin: %q", leaked)
				}
			})
		}
	}
}
