package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func values(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "charts", "lbplane", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryValueHasARow: each leaf of values.yaml, found by decoding it as data, has a row with its default.
func TestEveryValueHasARow(t *testing.T) {
	src := values(t)
	rows, err := Rows(src)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Row{}
	for _, r := range rows {
		byPath[r.Path] = r
	}
	var data map[string]any
	if err := yaml.Unmarshal(src, &data); err != nil {
		t.Fatal(err)
	}
	var leaves func(prefix string, m map[string]any)
	n := 0
	leaves = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := strings.TrimPrefix(prefix+"."+k, ".")
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				if r, ok := byPath[path]; ok && r.Default != "" {
					continue // written inline in values.yaml: one row
				}
				leaves(path, sub)
				continue
			}
			n++
			if r, ok := byPath[path]; !ok || r.Default == "" {
				t.Errorf("value %s has no row with its default", path)
			}
		}
	}
	leaves("", data)
	if n < 50 {
		t.Errorf("found only %d values in values.yaml", n)
	}
	if r := byPath["replicas"]; r.Default != "2" {
		t.Errorf("replicas: default %q, want 2 as values.yaml says", r.Default)
	}
	if r := byPath["image.tag"]; !strings.Contains(r.Doc, "appVersion") {
		t.Errorf("image.tag: the comment beside it is lost: %+v", r)
	}
}

// TestPageIsCurrent: docs/chart-values.md is what make generate writes from today's values.yaml.
func TestPageIsCurrent(t *testing.T) {
	want, err := Render(values(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "chart-values.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/chart-values.md is stale: run make generate")
	}
}
