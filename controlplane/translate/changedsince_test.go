package translate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// ChangedSince across several results: every policy whose result differs between an older result and a
// newer one made from it, through any number of results in between, is among the keys it lists (the
// status writer looks at results once a tick, after any number of translations).
func TestChangedSinceAcrossSeveralResults(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 16))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTranslator()
	var policies []*v1alpha1.LoadBalancerPolicy
	for i := range 40 {
		policies = append(policies, contended(r, fmt.Sprintf("p%d", i), base))
	}
	var results []*Result
	for range 60 {
		next := append([]*v1alpha1.LoadBalancerPolicy(nil), policies...)
		for range 1 + r.IntN(3) {
			i := r.IntN(len(next))
			if r.IntN(8) == 0 {
				next = append(next[:i], next[i+1:]...)
				continue
			}
			p := contended(r, next[i].Name, base)
			p.Namespace = next[i].Namespace
			next[i] = p
		}
		policies = next
		results = append(results, tr.Translate(policies, Refs{Files: testFiles(t)}))
	}
	for i, old := range results {
		for _, cur := range results[i:] {
			keys, ok := cur.ChangedSince(old)
			if !ok {
				t.Fatalf("ChangedSince across %d results: not known", len(results))
			}
			listed := map[objkey.Key]bool{}
			for _, k := range keys {
				listed[k] = true
			}
			for k, pr := range cur.Policies.All() {
				if old.Policies.Of(k) != pr && !listed[k] {
					t.Errorf("%s changed and is not listed", k)
				}
			}
			for k := range old.Policies.All() {
				if cur.Policies.Of(k) == nil && !listed[k] {
					t.Errorf("%s was removed and is not listed", k)
				}
			}
		}
	}
	if _, ok := results[len(results)-1].ChangedSince(&Result{}); ok {
		t.Error("ChangedSince a result of no translator: known")
	}
}
