package kubepki

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Two replicas each store their own list: the ConfigMap keeps both, and drops expired entries.
func TestRevocationsStoreMergesReplicas(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	r := &Revocations{Client: c.CoreV1(), Namespace: "lbplane", Name: "demo-revocations"}
	if got, err := r.Load(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before any revocation: %v, %v", got, err)
	}
	now := time.Now().UTC().Round(time.Second)
	a := apiwire.Revocation{NodeID: "a", At: now, Until: now.Add(time.Hour)}
	b := apiwire.Revocation{Serial: "1f", At: now.Add(time.Second), Until: now.Add(time.Hour)}
	old := apiwire.Revocation{NodeID: "old", At: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour)}
	if err := r.Store(ctx, []apiwire.Revocation{a, old}); err != nil {
		t.Fatal(err)
	}
	if err := r.Store(ctx, []apiwire.Revocation{b}); err != nil { // a replica that has not seen a yet
		t.Fatal(err)
	}
	got, err := r.Load(ctx)
	if err != nil || len(got) != 2 || got[0].NodeID != "a" || got[1].Serial != "1f" {
		t.Fatalf("stored %+v, %v; want a and 1f", got, err)
	}
	if err := r.Store(ctx, []apiwire.Revocation{a, b}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Load(ctx); len(got) != 2 {
		t.Errorf("storing the same again: %d entries, want 2", len(got))
	}
}
