package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	beginMark = "<!-- summary:begin "
	endMark   = "<!-- summary:end -->"
)

// table is one generated table of a report: the marker's spec and the rendered markdown.
type table struct {
	spec string
	text string
}

// findReports lists root/*/REPORT.md, sorted.
func findReports(root string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(root, "*", "REPORT.md"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no %s/*/REPORT.md", root)
	}
	sort.Strings(paths)
	return paths, nil
}

// render replaces the text between every pair of markers of the report at path with what its spec renders
// from the raw files beside the report, and returns the new text and the tables.
func render(path, text string) (string, []table, error) {
	dir := filepath.Dir(path)
	lines := strings.SplitAfter(text, "\n")
	var out strings.Builder
	var tables []table
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, beginMark) {
			continue
		}
		spec := strings.TrimSuffix(strings.TrimPrefix(trimmed, beginMark), "-->")
		spec = strings.TrimSpace(spec)
		end := -1
		for j := i + 1; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if t == endMark {
				end = j
				break
			}
			if strings.HasPrefix(t, beginMark) {
				break
			}
		}
		if end < 0 {
			return "", nil, fmt.Errorf("line %d: %q has no %q after it", i+1, trimmed, endMark)
		}
		rendered, err := renderSpec(dir, spec)
		if err != nil {
			return "", nil, fmt.Errorf("line %d: %s: %w", i+1, spec, err)
		}
		out.WriteString(rendered)
		out.WriteString(lines[end])
		tables = append(tables, table{spec: spec, text: rendered})
		i = end
	}
	return out.String(), tables, nil
}

// spec is a marker's parsed key=value fields.
type spec struct {
	kind string
	src  []string
	opts map[string]string
}

func parseSpec(s string) (spec, error) {
	sp := spec{opts: map[string]string{}}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return sp, fmt.Errorf("field %q: want key=value", f)
		}
		switch k {
		case "kind":
			sp.kind = v
		case "src":
			sp.src = strings.Split(v, ",")
		default:
			sp.opts[k] = v
		}
	}
	if sp.kind == "" {
		return sp, fmt.Errorf("no kind=")
	}
	if len(sp.src) == 0 {
		return sp, fmt.Errorf("no src=")
	}
	return sp, nil
}

func renderSpec(dir, s string) (string, error) {
	sp, err := parseSpec(s)
	if err != nil {
		return "", err
	}
	r, ok := renderers[sp.kind]
	if !ok {
		var kinds []string
		for k := range renderers {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		return "", fmt.Errorf("kind %q: unknown (known: %s)", sp.kind, strings.Join(kinds, ", "))
	}
	for i, src := range sp.src {
		if filepath.IsAbs(src) || strings.Contains(src, "..") {
			return "", fmt.Errorf("src %q: must be a path inside the report's directory", src)
		}
		sp.src[i] = filepath.Join(dir, src)
		if _, err := os.Stat(sp.src[i]); err != nil {
			return "", fmt.Errorf("src %q: %w", src, err)
		}
	}
	return r(sp)
}
