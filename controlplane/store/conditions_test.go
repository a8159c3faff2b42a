package store_test

import (
	"fmt"
	"testing"

	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// Condition times survive a reopen of the bbolt store and are shared through etcd, in writes of many
// policies at once (more than one etcd transaction holds); nil deletes a policy's record; migrating a store
// copies them.
func TestConditionTimesSurviveAndShare(t *testing.T) {
	recs := map[string][]byte{}
	for i := range 250 {
		recs[fmt.Sprintf("default/p%03d", i)] = []byte(fmt.Sprintf(`{"Accepted":{"status":"True","at":"2026-11-29T10:%02d:00Z"}}`, i%60))
	}
	check := func(t *testing.T, s store.ConditionTimes) {
		t.Helper()
		got, err := s.ConditionTimes()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(recs)-1 || got["default/p000"] != nil || string(got["default/p249"]) != string(recs["default/p249"]) {
			t.Fatalf("%d records (want %d), p000 %q, p249 %q", len(got), len(recs)-1, got["default/p000"], got["default/p249"])
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		dir := t.TempDir()
		s, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutConditionTimes(recs); err != nil {
			t.Fatal(err)
		}
		if err := s.PutConditionTimes(map[string][]byte{"default/p000": nil}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if s, err = store.Open(dir); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
	t.Run("etcd", func(t *testing.T) {
		c := etcdtest.Start(t, 1)
		a, b := openEtcd(t, c, "a"), openEtcd(t, c, "b")
		if err := a.PutConditionTimes(recs); err != nil {
			t.Fatal(err)
		}
		if err := b.PutConditionTimes(map[string][]byte{"default/p000": nil}); err != nil {
			t.Fatal(err)
		}
		check(t, a)
		if n := a.RefusedCount(); n != 0 {
			t.Fatalf("%d of lbplane's own records refused: %+v", n, a.Refused())
		}
		// Migrating a data directory's store to etcd copies its condition times.
		bolt, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer bolt.Close()
		if err := bolt.PutConditionTimes(map[string][]byte{"default/m": []byte(`{"Ready":{"status":"True","at":"2026-11-29T10:00:00Z"}}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Copy(bolt, b); err != nil {
			t.Fatal(err)
		}
		if got, err := a.ConditionTimes(); err != nil || string(got["default/m"]) != `{"Ready":{"status":"True","at":"2026-11-29T10:00:00Z"}}` {
			t.Fatalf("after migrating: %q, %v", got["default/m"], err)
		}
	})
}
