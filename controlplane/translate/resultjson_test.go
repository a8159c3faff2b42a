package translate

import (
	"reflect"
	"testing"
	"unsafe"
)

// Every field of PolicyResult but Backends (written as BackendOf) is written, under its name and type: a
// field added to PolicyResult and not to resultJSON would silently vanish from the JSON.
func TestResultJSONHasEveryField(t *testing.T) {
	out := reflect.TypeOf(resultJSON{})
	in := reflect.TypeOf(PolicyResult{})
	for i := range in.NumField() {
		f := in.Field(i)
		if f.Name == "Backends" {
			continue
		}
		g, ok := out.FieldByName(f.Name)
		if !ok || g.Type != f.Type || g.Tag != f.Tag {
			t.Errorf("PolicyResult.%s (%s %q) is not written as it is", f.Name, f.Type, f.Tag)
		}
	}
	if n := out.NumField(); n != in.NumField() { // Backends out, BackendOf in
		t.Errorf("resultJSON has %d fields, PolicyResult %d", n, in.NumField())
	}
	// The point of PolicyResult's field order: 256 bytes (a size class) at most.
	if s := unsafe.Sizeof(PolicyResult{}); s > 256 {
		t.Errorf("PolicyResult is %d bytes, over the 256-byte size class", s)
	}
}
