package pushapi

import (
	"cmp"
	"testing"

	"github.com/lbplane/lbplane/controlplane/translate"
)

// cmpKey must order keys as their "namespace/name" strings do: the store lists records in that order, and
// a push finds its place in the list by binary search.
func TestCmpKeyIsTheStoreOrder(t *testing.T) {
	keys := []translate.Key{key("a", "x"), key("a-b", "x"), key("a.b", "a"), key("ab", ""), key("a", "b/c"), key("", "z"), key("a0", "x"), key("a", "x"), key("b", "a")}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := cmpKey(a, b), cmp.Compare(a.String(), b.String()); got != want {
				t.Errorf("cmpKey(%v, %v) = %d, the store orders them %d", a, b, got, want)
			}
		}
	}
}

func key(namespace, name string) translate.Key {
	return translate.Key{Namespace: namespace, Name: name}
}
