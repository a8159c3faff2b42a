package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// unknownFields returns the path of every field in v (decoded JSON) that t does not have, so that a typo is
// reported where it is ("spec.listener.proto"), and all typos at once.
func unknownFields(v any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			var out []string
			for k, x := range val {
				out = append(out, unknownFields(x, t.Elem(), join(path, k))...)
			}
			return out
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		fields := jsonFields(t)
		var out []string
		for k, x := range val {
			ft, ok := fields[k]
			if !ok {
				out = append(out, fmt.Sprintf("%q", join(path, k)))
				continue
			}
			if ft != nil {
				out = append(out, unknownFields(x, ft, join(path, k))...)
			}
		}
		slices.Sort(out)
		return out
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		var out []string
		for i, x := range val {
			out = append(out, unknownFields(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	return nil
}

// jsonFields maps JSON names to field types, following inlined and embedded structs. A nil type means a
// field whose contents are not checked (types with their own JSON encoding, such as times and durations).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		if reflect.PointerTo(ft).Implements(unmarshalerType) || ft.Implements(unmarshalerType) {
			out[name] = nil
		} else {
			out[name] = ft
		}
	}
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
