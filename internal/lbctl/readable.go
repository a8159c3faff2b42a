package lbctl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
)

var durationType = reflect.TypeFor[time.Duration]()

// readable turns a value into what a person reads in explain's text: durations as Go prints them ("5s",
// "1h0m0s", as kubectl does), and every key in lowerCamelCase, the JSON name where the type gives one, so
// that fields without a JSON name do not stand out in Go's capitals. Zero values of omitempty fields are
// left out, as JSON leaves them. -o json and yaml keep the wire form.
func readable(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	if v.CanInterface() {
		if _, ok := v.Interface().(json.Marshaler); ok && v.Kind() != reflect.Pointer && v.Kind() != reflect.Struct {
			b, err := json.Marshal(v.Interface())
			var out any
			if err == nil && json.Unmarshal(b, &out) == nil {
				return out
			}
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return readable(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			fv := v.Field(i)
			if (strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")) && fv.IsZero() {
				continue
			}
			if f.Anonymous && name == "" {
				if m, ok := readable(fv).(map[string]any); ok {
					for k, x := range m {
						out[k] = x
					}
					continue
				}
			}
			if name == "" {
				name = lowerFirst(f.Name)
			}
			out[name] = readable(fv)
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = readable(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = readable(it.Value())
		}
		return out
	}
	if v.CanInterface() {
		return v.Interface()
	}
	return nil
}

// lowerFirst lowers the leading capitals of a Go name: MaxConnections is maxConnections, IPFamily ipFamily.
func lowerFirst(s string) string {
	r := []rune(s)
	for i := range r {
		if !unicode.IsUpper(r[i]) {
			break
		}
		// Keep the capital that starts the next word (IPFamily: the F).
		if i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) {
			break
		}
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
