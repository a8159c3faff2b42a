package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// Endpoint overrides survive a reopen of the bbolt store, one record per policy, and nil deletes one.
func TestBoltEndpointOverridesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutEndpointOverrides("default/a", []byte(`[{"endpoint":"198.51.100.1:80","state":"Draining"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEndpointOverrides("default/b", []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEndpointOverrides("default/b", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.EndpointOverrides()
	if err != nil || len(all) != 1 || string(all["default/a"]) != `[{"endpoint":"198.51.100.1:80","state":"Draining"}]` {
		t.Fatalf("after reopen: %q, %v", all, err)
	}
}

// Two replicas on one etcd: one's write of a policy's overrides is announced to the other, a write over
// what a replica has not read fails with ErrConflict, forged records are refused, and migrating the store
// copies the overrides.
func TestEtcdEndpointOverridesSharedAndAuthenticated(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := openEtcd(t, c, "a"), openEtcd(t, c, "b")
	for _, s := range []*store.Etcd{a, b} {
		select {
		case <-s.OverrideChanges(): // the watch's start
		case <-time.After(10 * time.Second):
			t.Fatal("no override signal at the watch's start")
		}
		if _, err := s.EndpointOverrides(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PutEndpointOverrides("shop/web", []byte(`[{"endpoint":"198.51.100.1:80","state":"Maintenance"}]`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.OverrideChanges():
	case <-time.After(10 * time.Second):
		t.Fatal("replica b was not told of a's overrides")
	}
	if err := b.PutEndpointOverrides("shop/web", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("b writing over overrides it has not read: %v, want ErrConflict", err)
	}
	got, err := b.EndpointOverrides()
	if err != nil || string(got["shop/web"]) != `[{"endpoint":"198.51.100.1:80","state":"Maintenance"}]` {
		t.Fatalf("b reads %q, %v", got, err)
	}
	if err := b.PutEndpointOverrides("shop/web", nil); err != nil {
		t.Fatalf("b's delete after reading: %v", err)
	}
	if got, err := a.EndpointOverrides(); err != nil || len(got) != 0 {
		t.Fatalf("a after b's delete: %q, %v", got, err)
	}
	// A record another etcd client wrote is refused, not served.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Client().Put(ctx, "/test/overrides/shop/evil", `[{"endpoint":"198.51.100.2:80","state":"Maintenance"}]`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forged overrides refused", 10*time.Second, func() bool { return len(a.Refused()) == 1 })
	if got, err := a.EndpointOverrides(); err != nil || len(got) != 0 {
		t.Fatalf("a serves forged overrides: %q, %v", got, err)
	}
	// Migrating a bbolt store copies its overrides.
	dir := t.TempDir()
	bolt, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	if err := bolt.PutEndpointOverrides("default/m", []byte(`[{"endpoint":"198.51.100.3","state":"Draining"}]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Delete(ctx, "/test/overrides/shop/evil"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Copy(bolt, b); err != nil {
		t.Fatal(err)
	}
	if got, err := a.EndpointOverrides(); err != nil || string(got["default/m"]) != `[{"endpoint":"198.51.100.3","state":"Draining"}]` {
		t.Fatalf("after migrating: %q, %v", got, err)
	}
}
