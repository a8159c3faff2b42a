package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// typeErrors returns, with full paths ("spec.routes[0].backends[1].weight"), every value in v (decoded JSON)
// whose JSON type does not fit the field: encoding/json names the field without its list indices, and only
// the first. The paths of keys that name no field are appended to unknown.
func typeErrors(v any, t reflect.Type, path string, unknown *[]string) []string {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return unmarshalerError(v, t, path)
	}
	want := ""
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f, ok := v.(float64); !ok || f != math.Trunc(f) {
			want = "an integer"
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			want = "a string"
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			want = "true or false"
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			want = "a list"
			break
		}
		var out []string
		for i, x := range list {
			out = append(out, typeErrors(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i), unknown)...)
		}
		return out
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			want = "an object"
			break
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, typeErrors(m[k], t.Elem(), join(path, k), unknown)...)
		}
		return out
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			want = "an object"
			break
		}
		fields := jsonFields(t)
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if ft, ok := fields[k]; ok {
				out = append(out, typeErrors(m[k], ft, join(path, k), unknown)...)
			} else {
				*unknown = append(*unknown, join(path, k))
			}
		}
		return out
	}
	if want == "" {
		return nil
	}
	return []string{fmt.Sprintf("%s: must be %s, got %s", path, want, jsonType(v))}
}

// unmarshalerError checks a value of a type with its own JSON form (durations, times) by decoding it.
func unmarshalerError(v any, t reflect.Type, path string) []string {
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, reflect.New(t).Interface()); err == nil {
		return nil
	}
	switch t.Name() {
	case "Duration":
		return []string{fmt.Sprintf("%s: must be a duration such as \"5s\" or \"1m30s\", got %s", path, jsonType(v))}
	case "Time":
		return []string{fmt.Sprintf("%s: must be a time such as \"2026-01-02T15:04:05Z\", got %s", path, jsonType(v))}
	}
	return []string{fmt.Sprintf("%s: cannot be %s", path, jsonType(v))}
}

func jsonType(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", clipString(x))
	case float64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clipString(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// fieldsByType caches jsonFields: a type's fields never change, and walking them by reflection was a tenth
// of decoding a policy. The maps it holds are shared, so callers only read them.
var fieldsByType sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps JSON names to field types, following inlined and embedded structs.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := walkJSONFields(t)
	fieldsByType.Store(t, m)
	return m
}

func walkJSONFields(t reflect.Type) map[string]reflect.Type {
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
		out[name] = f.Type
	}
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
