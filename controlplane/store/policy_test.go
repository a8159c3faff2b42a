package store

import (
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// A record's document is decoded once: every reader gets the same policy, with the record's metadata.
func TestRecordDecodesItsPolicyOnce(t *testing.T) {
	created := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	r := &Record{Namespace: "shop", Name: "web", Generation: 4, Created: created, UID: "u1",
		Document: []byte(`{"apiVersion":"lbplane.io/v1alpha1","kind":"LoadBalancerPolicy","metadata":{"name":"web"},"spec":{"listener":{"port":8080}}}`)}
	p, err := r.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "shop" || p.Name != "web" || p.Generation != 4 || !p.CreationTimestamp.Time.Equal(created) || p.UID != "u1" || p.Spec.Listener.Port != 8080 {
		t.Fatalf("policy %+v: want the document's spec with the record's metadata", p)
	}
	again, err := r.Policy()
	if err != nil || again != p {
		t.Fatalf("second read: %p, %v; want the policy decoded the first time (%p)", again, err, p)
	}
}

// A record made from a policy decoded already hands that policy out and never decodes its document.
func TestRecordWithPolicyIsNotDecodedAgain(t *testing.T) {
	given := &v1alpha1.LoadBalancerPolicy{}
	given.Name = "web"
	r := (&Record{Namespace: "shop", Name: "web", Generation: 2, Document: []byte("not a policy")}).WithPolicy(given)
	p, err := r.Policy()
	if err != nil || p != given || p.Namespace != "shop" || p.Generation != 2 {
		t.Fatalf("Policy() = %+v, %v; want the given policy with the record's metadata", p, err)
	}
	// Without one, the same document is refused, naming the policy and not the bytes.
	_, err = (&Record{Namespace: "shop", Name: "web", Document: []byte("not a policy")}).Policy()
	if err == nil || !strings.Contains(err.Error(), "shop/web") {
		t.Fatalf("a document that does not decode: %v", err)
	}
}
