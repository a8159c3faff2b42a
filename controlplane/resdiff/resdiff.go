// Package resdiff compares two sets of Envoy resources, per proxy group, type and name, down to the field.
// Fields are named as Envoy's docs name them (snake_case, typed configs unpacked), so a change reads like
// the Envoy config it is.
package resdiff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// Change operations; the types are the push API's (apiwire), so a client decodes a diff without this package.
const (
	Added   = apiwire.Added
	Removed = apiwire.Removed
	Changed = apiwire.Changed
)

// Change is one resource that differs.
type Change = apiwire.Change

// FieldChange is one leaf that differs; Old or New is empty when the field is absent on that side.
type FieldChange = apiwire.FieldChange

// Results builds both translations' resources and compares them: what lbctl diff and POST /v1/diff show.
func Results(before, after *translate.Result) ([]Change, error) {
	b, err := xdsbuild.BuildAll(before.IR)
	if err != nil {
		return nil, err
	}
	a, err := xdsbuild.BuildAll(after.IR)
	if err != nil {
		return nil, err
	}
	return Diff(b, a)
}

// Diff compares before and after, both by proxy group. Secrets are compared but never printed: a changed
// secret has one field, "content".
func Diff(before, after map[string]xdsbuild.Resources) ([]Change, error) {
	var out []Change
	groups := slices.Sorted(maps.Keys(union(before, after)))
	for _, g := range groups {
		for _, typ := range xdsbuild.Types {
			old, err := byName(before[g][typ])
			if err != nil {
				return nil, err
			}
			neu, err := byName(after[g][typ])
			if err != nil {
				return nil, err
			}
			short := typ[strings.LastIndex(typ, ".")+1:]
			for _, name := range slices.Sorted(maps.Keys(union(old, neu))) {
				o, inOld := old[name]
				n, inNew := neu[name]
				c := Change{Group: g, Type: short, Name: name}
				switch {
				case !inOld:
					c.Op = Added
				case !inNew:
					c.Op = Removed
				case proto.Equal(o, n):
					continue
				case short == "Secret":
					c.Op, c.Fields = Changed, []FieldChange{{Path: "content", Old: `"[redacted]"`, New: `"[redacted, changed]"`}}
				default:
					c.Op = Changed
					fields, err := fieldDiff(o, n)
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", short, name, err)
					}
					c.Fields = fields
				}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func byName(list []proto.Message) (map[string]proto.Message, error) {
	out := make(map[string]proto.Message, len(list))
	for _, m := range list {
		r, ok := m.(types.Resource)
		if !ok {
			return nil, fmt.Errorf("%T is not an xDS resource", m)
		}
		out[cachev3.GetResourceName(r)] = m
	}
	return out, nil
}

// tree renders a resource as generic JSON with Envoy's field names; Any fields are unpacked with "@type".
func tree(m proto.Message) (any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	err = json.Unmarshal(b, &v)
	return v, err
}

func fieldDiff(a, b proto.Message) ([]FieldChange, error) {
	ta, err := tree(a)
	if err != nil {
		return nil, err
	}
	tb, err := tree(b)
	if err != nil {
		return nil, err
	}
	var out []FieldChange
	walk("", ta, tb, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func render(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walk records the leaves that differ. Lists are compared by position; a list whose elements all carry a
// "name" is compared by name, so that inserting one filter or cluster does not show every later one changed.
func walk(path string, a, b any, out *[]FieldChange) {
	// A field on one side only is walked against an empty one, so that an added sub-tree shows its leaves.
	a, b = orEmpty(a, b), orEmpty(b, a)
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(union(av, bv))) {
			walk(join(path, k), av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		if ka, kb, ok := keyed(av, bv); ok {
			for _, k := range slices.SortedFunc(maps.Keys(union(ka, kb)), cmp.Compare) {
				walk(fmt.Sprintf("%s[name=%s]", path, k), ka[k], kb[k], out)
			}
			return
		}
		for i := range max(len(av), len(bv)) {
			var x, y any
			if i < len(av) {
				x = av[i]
			}
			if i < len(bv) {
				y = bv[i]
			}
			walk(fmt.Sprintf("%s[%d]", path, i), x, y, out)
		}
		return
	}
	if render(a) != render(b) {
		*out = append(*out, FieldChange{Path: path, Old: render(a), New: render(b)})
	}
}

func orEmpty(v, other any) any {
	if v != nil {
		return v
	}
	switch other.(type) {
	case map[string]any:
		return map[string]any{}
	case []any:
		return []any{}
	}
	return nil
}

// keyed indexes two lists by their elements' "name" when every element has a distinct one.
func keyed(a, b []any) (map[string]any, map[string]any, bool) {
	index := func(list []any) (map[string]any, bool) {
		m := map[string]any{}
		for _, e := range list {
			o, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			n, ok := o["name"].(string)
			if !ok || n == "" {
				return nil, false
			}
			if _, dup := m[n]; dup {
				return nil, false
			}
			m[n] = e
		}
		return m, true
	}
	ka, ok1 := index(a)
	kb, ok2 := index(b)
	return ka, kb, ok1 && ok2 && len(a)+len(b) > 0
}
