package store

import (
	"cmp"
	"testing"

	"github.com/lbplane/lbplane/controlplane/objkey"
)

// CompareKeys must order keys as their "namespace/name" strings do: the store lists records in that order, and
// a push finds its place in the list by binary search.
func TestCompareKeysIsTheStoreOrder(t *testing.T) {
	keys := []objkey.Key{{Namespace: "a", Name: "x"}, {Namespace: "a-b", Name: "x"}, {Namespace: "a.b", Name: "a"}, {Namespace: "ab", Name: ""}, {Namespace: "a", Name: "b/c"}, {Namespace: "", Name: "z"}, {Namespace: "a0", Name: "x"}, {Namespace: "a", Name: "x"}, {Namespace: "b", Name: "a"}}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := CompareKeys(a, b), cmp.Compare(a.String(), b.String()); got != want {
				t.Errorf("CompareKeys(%v, %v) = %d, the store orders them %d", a, b, got, want)
			}
		}
	}
}
