package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
)

func TestRecordsSurviveReopenByteForByte(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"apiVersion":"lbplane.io/v1alpha1","kind":"LoadBalancerPolicy","metadata":{"name":"a"},"spec":{"z":1,  "a":[2]}}`)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := s.Apply(0, []*store.Record{{Namespace: "default", Name: "a", Document: doc, Generation: 3, Created: now, Updated: now, UID: "u"},
		{Namespace: "default", Name: "b", Document: []byte(`{}`)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(0, nil, []objkey.Key{{Namespace: "default", Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(dir); err == nil {
		t.Error("a second process could open the same store")
	}
	s.Close()

	s, err = store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, _, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	r := recs[0]
	if !bytes.Equal(r.Document, doc) || r.Generation != 3 || !r.Created.Equal(now) || r.UID != "u" || r.Key().String() != "default/a" {
		t.Errorf("record changed across reopen: %+v\n%s", r, r.Document)
	}
}
