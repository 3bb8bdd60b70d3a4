package kube

import "testing"

func TestJSONCopiesDeeply(t *testing.T) {
	type obj struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
		Items  []string          `json:"items"`
	}
	in := &obj{Name: "a", Labels: map[string]string{"k": "v"}, Items: []string{"x"}}
	out := jsonCopy(in)
	out.Labels["k"], out.Items[0] = "changed", "changed"
	if in.Labels["k"] != "v" || in.Items[0] != "x" || out.Name != "a" {
		t.Fatalf("the copy shares memory with the original or lost a field: in=%+v out=%+v", in, out)
	}
}
