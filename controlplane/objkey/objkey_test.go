package objkey

import "testing"

// Parse takes back exactly what Key.String gives, and nothing that is not a namespace and a name.
func TestParseTakesBackKeyString(t *testing.T) {
	k := Key{Namespace: "shop", Name: "web"}
	if got, ok := Parse(k.String()); !ok || got != k {
		t.Fatalf("Parse(%q) = %v, %v", k.String(), got, ok)
	}
	for _, bad := range []string{"", "web", "/web", "shop/", "shop/web/x"} {
		if got, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %v, want refused", bad, got)
		}
	}
}

// A cluster's name is the key's string form and the backend, the form policies' clusters have always had.
func TestClusterName(t *testing.T) {
	if got, want := Cluster(Key{Namespace: "shop", Name: "web"}, "v2"), "shop/web/v2"; got != want {
		t.Fatalf("Cluster = %q, want %q", got, want)
	}
}

// A derived name is the key's string form and the parts, each after a slash, made in one allocation.
func TestNameIsOneAllocation(t *testing.T) {
	k := Key{Namespace: "shop", Name: "web"}
	if got, want := Name(k, "cart", "session"), "shop/web/cart/session"; got != want {
		t.Fatalf("Name = %q, want %q", got, want)
	}
	if got := Name(k); got != k.String() {
		t.Fatalf("Name without parts = %q, want %q", got, k.String())
	}
	if n := testing.AllocsPerRun(100, func() { _ = Name(k, "cart", "session") }); n != 1 {
		t.Fatalf("Name made %v allocations, want 1", n)
	}
}
