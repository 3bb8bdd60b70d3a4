package backends

import (
	"fmt"
	"sort"
	"strings"
)

// Factory builds a backend from its configuration.
type Factory func(Config) (Backend, error)

// Registry maps backend names to factories. It is built explicitly (see
// package builtin), never through init() side effects, so tests can make one
// with exactly the backends they need.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a backend; registering a name twice is an error.
func (r *Registry) Register(name string, f Factory) error {
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("backend %q registered twice", name)
	}
	r.factories[name] = f
	return nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the named backend. An unknown name is an ErrInvalid that lists
// the known ones.
func (r *Registry) New(name string, cfg Config) (Backend, error) {
	f, ok := r.factories[name]
	if !ok {
		return nil, Invalid("backend", "unknown backend %q; use one of: %s", name, strings.Join(r.Names(), ", "))
	}
	return f(cfg)
}
