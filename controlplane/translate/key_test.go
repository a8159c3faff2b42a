package translate

import "testing"

// ParseKey takes back exactly what Key.String gives, and nothing that is not a namespace and a name.
func TestParseKeyTakesBackKeyString(t *testing.T) {
	k := Key{Namespace: "shop", Name: "web"}
	if got, ok := ParseKey(k.String()); !ok || got != k {
		t.Fatalf("ParseKey(%q) = %v, %v", k.String(), got, ok)
	}
	for _, bad := range []string{"", "web", "/web", "shop/", "shop/web/x"} {
		if got, ok := ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) = %v, want refused", bad, got)
		}
	}
}
