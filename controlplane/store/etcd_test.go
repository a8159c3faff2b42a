package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

func openEtcd(t *testing.T, c *etcdtest.Cluster, id string) *store.Etcd {
	t.Helper()
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key, SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/test/", HealthInterval: 200 * time.Millisecond, Timeout: 2 * time.Second}, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// watchedRevision waits for s's watch to start (its first change signal) and returns the revision a List
// reads then: every change after it comes through the watch.
func watchedRevision(t *testing.T, s *store.Etcd) int64 {
	t.Helper()
	select {
	case <-s.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signal at the watch's start")
	}
	_, base, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	return base
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two replicas share one etcd: a write planned on what one replica read fails with ErrConflict once the
// other wrote, the other replica is told of the change, and records come back byte for byte.
func TestEtcdSharedWritesConflictAndNotify(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := openEtcd(t, c, "a"), openEtcd(t, c, "b")
	doc := []byte(`{"apiVersion":"lbplane.io/v1alpha1","kind":"LoadBalancerPolicy","metadata":{"name":"a"},"spec":{"z":1,  "a":[2]}}`)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	recs, rev, err := a.List()
	if err != nil || len(recs) != 0 {
		t.Fatalf("empty store: %v records, %v", len(recs), err)
	}
	// Drain the change signals of the start.
	for _, s := range []*store.Etcd{a, b} {
		select {
		case <-s.Changes():
		case <-time.After(5 * time.Second):
		}
	}
	rec := &store.Record{Namespace: "default", Name: "a", Document: doc, Generation: 3, Created: now, Updated: now, UID: "u"}
	rev2, err := b.Apply(rev, []*store.Record{rec, {Namespace: "default", Name: "b", Document: []byte(`{}`)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev {
		t.Errorf("revision did not move: %d then %d", rev, rev2)
	}
	select {
	case <-a.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("replica a was not told of replica b's write")
	}
	if _, err := a.Apply(rev, nil, []objkey.Key{{Namespace: "default", Name: "b"}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a write planned before another replica's: %v, want ErrConflict", err)
	}
	got, rev3, err := a.List()
	if err != nil {
		t.Fatal(err)
	}
	if rev3 != rev2 || len(got) != 2 || !got[0].Equal(rec) || !bytes.Equal(got[0].Document, doc) || got[1].Key().String() != "default/b" {
		t.Fatalf("a reads rev %d (want %d): %+v", rev3, rev2, got)
	}
	if _, err := a.Apply(rev3, nil, []objkey.Key{{Namespace: "default", Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	got, _, err = b.List()
	if err != nil || len(got) != 1 || !got[0].Equal(rec) {
		t.Fatalf("b after a's delete: %+v, %v", got, err)
	}
}

// Exactly one replica leads; when it goes, another takes over.
func TestEtcdElectionHandsOver(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := openEtcd(t, c, "a")
	waitFor(t, "a leads", 15*time.Second, a.Leader)
	b := openEtcd(t, c, "b")
	time.Sleep(500 * time.Millisecond)
	if b.Leader() {
		t.Fatal("two leaders")
	}
	if id, err := b.LeaderID(); err != nil || id != "a" {
		t.Fatalf("leader id %q, %v", id, err)
	}
	a.Close()
	waitFor(t, "b leads after a closed", 15*time.Second, b.Leader)
}

// A replica cut off from etcd says so, refuses writes, and recovers when etcd is back.
func TestEtcdCutOffIsStaleAndRefusesWrites(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := openEtcd(t, c, "a")
	_, rev, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	c.StopMember(0)
	waitFor(t, "stale", 20*time.Second, func() bool { return !s.StaleSince().IsZero() })
	if s.Leader() {
		t.Error("a stale replica reports itself leader")
	}
	_, err = s.Apply(rev, []*store.Record{{Namespace: "default", Name: "x", Document: []byte(`{}`)}}, nil)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "takes no writes") {
		t.Fatalf("write while cut off: %v", err)
	}
	c.StartMember(0)
	waitFor(t, "not stale once etcd is back", 30*time.Second, func() bool { return s.StaleSince().IsZero() })
	if _, err := s.Apply(rev, []*store.Record{{Namespace: "default", Name: "x", Document: []byte(`{}`)}}, nil); err != nil {
		t.Fatal(err)
	}
}

// Revocations made on two replicas are both kept; the leader's pruning drops only the expired ones.
func TestEtcdRevocationsMergeAndPrune(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := openEtcd(t, c, "a"), openEtcd(t, c, "b")
	now := time.Now().UTC().Truncate(time.Second)
	r1 := apiwire.Revocation{NodeID: "n1", At: now, Until: now.Add(time.Hour)}
	r2 := apiwire.Revocation{NodeID: "n2", At: now, Until: now.Add(-time.Minute)}
	if err := a.PutRevocations([]apiwire.Revocation{r1}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutRevocations([]apiwire.Revocation{r2}); err != nil { // b had not seen r1
		t.Fatal(err)
	}
	got, err := a.Revocations()
	if err != nil || len(got) != 2 {
		t.Fatalf("revocations: %+v, %v", got, err)
	}
	if err := a.PruneRevocations(now); err != nil {
		t.Fatal(err)
	}
	got, err = b.Revocations()
	if err != nil || len(got) != 1 || got[0].NodeID != "n1" {
		t.Fatalf("after pruning: %+v, %v", got, err)
	}
}

// The CA and tokens are sealed in etcd: their plaintext is not there, the same key opens them on another
// replica, and another key does not.
func TestEtcdSecretsSealed(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := openEtcd(t, c, "a")
	waitFor(t, "a leads", 15*time.Second, a.Leader)
	key := bytes.Repeat([]byte{7}, 32)
	want := &store.Secrets{CACert: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n"), CAKey: []byte("-----BEGIN PRIVATE KEY-----\nsecretkeybytes\n"), Token: "admintoken0123456789", ReadOnlyToken: "readonly0123456789"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sec, created, err := a.LoadOrCreateSecrets(ctx, key, func() (*store.Secrets, error) { return want, nil })
	if err != nil || !created || sec.Token != want.Token {
		t.Fatalf("create: %v %v %v", sec, created, err)
	}
	b := openEtcd(t, c, "b")
	sec, created, err = b.LoadOrCreateSecrets(ctx, key, func() (*store.Secrets, error) { t.Error("b created secrets"); return nil, nil })
	if err != nil || created || sec.Token != want.Token || !bytes.Equal(sec.CAKey, want.CAKey) || sec.ReadOnlyToken != want.ReadOnlyToken {
		t.Fatalf("load: %+v %v %v", sec, created, err)
	}
	resp, err := c.Client().Get(ctx, "/test/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		for _, plain := range []string{"secretkeybytes", want.Token, want.ReadOnlyToken, "BEGIN PRIVATE KEY"} {
			if bytes.Contains(kv.Value, []byte(plain)) {
				t.Errorf("%s holds %q in plaintext", kv.Key, plain)
			}
		}
	}
	if _, _, err := b.LoadOrCreateSecrets(ctx, bytes.Repeat([]byte{8}, 32), nil); err == nil || !strings.Contains(err.Error(), "same key file") {
		t.Fatalf("another key: %v", err)
	}
}

// A write with more operations than etcd takes in one transaction is refused as too large, not as etcd
// being down, and writes nothing.
func TestEtcdWriteTooLargeForOneTransaction(t *testing.T) {
	c := etcdtest.StartWith(t, 1) // etcd's default --max-txn-ops, 128
	s := openEtcd(t, c, "a")
	var recs []*store.Record
	for i := range 200 {
		recs = append(recs, &store.Record{Namespace: "default", Name: fmt.Sprint("p", i), Document: []byte(`{}`)})
	}
	_, err := s.Apply(0, recs, nil)
	if !errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Fatalf("200 policies in one write: %v", err)
	}
	if got, _, err := s.List(); err != nil || len(got) != 0 {
		t.Fatalf("after the refused write: %d records, %v", len(got), err)
	}
}

// A replica learns what another wrote from its watch's events (ChangesSince): the records put and the keys
// deleted since the revision it is at, each key once with its last value, and the revision they bring it
// to, on which its next write succeeds. Before the watch covers a revision, it says it cannot tell.
func TestEtcdChangesSinceFromTheWatch(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := openEtcd(t, c, "a"), openEtcd(t, c, "b")
	if _, _, _, ok := a.ChangesSince(-1); ok {
		t.Fatal("ChangesSince answers for a revision before its watch started")
	}
	base := watchedRevision(t, a)
	if puts, dels, rev, ok := a.ChangesSince(base); !ok || len(puts)+len(dels) != 0 || rev != base {
		t.Fatalf("nothing written yet: ok %v, %d puts, %d deletes, rev %d (want %d)", ok, len(puts), len(dels), rev, base)
	}
	x1 := &store.Record{Namespace: "default", Name: "x", Document: []byte(`{"v":1}`), Generation: 1}
	x2 := &store.Record{Namespace: "default", Name: "x", Document: []byte(`{"v":2}`), Generation: 2}
	y := &store.Record{Namespace: "other", Name: "y", Document: []byte(`{}`), Generation: 1}
	_, bRev, err := b.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		puts []*store.Record
		dels []objkey.Key
	}{{[]*store.Record{x1, y}, nil}, {[]*store.Record{x2}, nil}, {nil, []objkey.Key{y.Key()}}} {
		if bRev, err = b.Apply(bRev, w.puts, w.dels); err != nil {
			t.Fatal(err)
		}
	}
	var puts []*store.Record
	var dels []objkey.Key
	var rev int64
	waitFor(t, "a's watch delivers b's three writes", 10*time.Second, func() bool {
		var ok bool
		puts, dels, rev, ok = a.ChangesSince(base)
		if !ok {
			t.Fatal("ChangesSince cannot tell, with a watch running since before the writes")
		}
		return rev == bRev
	})
	if len(puts) != 1 || !puts[0].Equal(x2) || len(dels) != 1 || dels[0] != y.Key() {
		t.Fatalf("changes since %d: puts %+v, deletes %v; want x at generation 2 and other/y deleted", base, puts, dels)
	}
	// a plans on the revision the changes brought it to, and its write is taken.
	aRev, err := a.Apply(rev, nil, []objkey.Key{{Namespace: "default", Name: "x"}})
	if err != nil {
		t.Fatalf("a write on the revision ChangesSince returned: %v", err)
	}
	// An empty write changes nothing and moves no revision.
	if r, err := a.Apply(aRev, nil, nil); err != nil || r != aRev {
		t.Fatalf("an empty write: revision %d (want %d), %v", r, aRev, err)
	}
	waitFor(t, "b's watch delivers a's delete", 10*time.Second, func() bool {
		_, dels, r, ok := b.ChangesSince(bRev)
		return ok && r == aRev && len(dels) == 1 && dels[0].String() == "default/x"
	})
}

// Records another etcd client writes under the prefix are refused, never served, and reported: a policy
// (in the store's list and the watch's changes alike), one lbplane wrote moved to another key, the
// revocations, a rollout, a replica's Envoys and a key lbplane never writes. What lbplane writes over them
// is served again, and a refused record deleted is no longer reported.
func TestEtcdRecordsOfOtherWritersAreRefused(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := openEtcd(t, c, "a")
	base := watchedRevision(t, a)
	good := &store.Record{Namespace: "default", Name: "good", Document: []byte(`{"kind":"LoadBalancerPolicy"}`), Generation: 1}
	base, err := a.Apply(base, []*store.Record{good}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutRollout("edge", []byte(`{"phase":"Progressing"}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other := c.Client()
	sealedGood, err := other.Get(ctx, "/test/policies/default/good")
	if err != nil || len(sealedGood.Kvs) != 1 {
		t.Fatalf("reading lbplane's record: %v", err)
	}
	evil, _ := json.Marshal(&store.Record{Namespace: "default", Name: "evil", Document: []byte(`{"kind":"LoadBalancerPolicy"}`), Generation: 1})
	forged := map[string]string{
		"/test/policies/default/evil":  string(evil),
		"/test/policies/default/moved": string(sealedGood.Kvs[0].Value), // lbplane's MAC, another key
		"/test/revocations":            `[]`,
		"/test/rollouts/edge":          `{"phase":"Progressing","stage":9}`,
		"/test/proxies/intruder":       `[{"nodeId":"fake","address":"192.0.2.1","statsPort":19001}]`,
		"/test/elsewhere":              `anything`,
	}
	for k, v := range forged {
		if _, err := other.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every forged record reported", 10*time.Second, func() bool { return len(a.Refused()) == len(forged) })
	for _, r := range a.Refused() {
		if _, ok := forged[r.Key]; !ok || r.ModRevision == 0 || r.Reason == "" {
			t.Errorf("refused %+v, which is not one of the forged records", r)
		}
	}
	// The watch's changes: the forged policies are not puts; their keys read as deleted, as List has them.
	puts, _, _, ok := a.ChangesSince(base)
	if !ok {
		t.Fatal("ChangesSince cannot tell, with a watch running")
	}
	for _, p := range puts {
		t.Errorf("the watch hands on %s, written by another client", p.Key())
	}
	recs, _, err := a.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !recs[0].Equal(good) {
		t.Errorf("List serves %d records, want lbplane's own only: %+v", len(recs), recs)
	}
	if rs, err := a.Revocations(); err != nil || len(rs) != 0 {
		t.Errorf("revocations: %+v, %v", rs, err)
	}
	ros, err := a.Rollouts()
	if err != nil || len(ros) != 0 {
		t.Errorf("rollouts served: %q, %v", ros, err)
	}
	if ps, err := a.Proxies(); err != nil || len(ps) != 0 {
		t.Errorf("proxies served: %q, %v", ps, err)
	}
	// lbplane writes over the forged rollout (it knows the key's revision), and serves what it wrote.
	if err := a.PutRollout("edge", []byte(`{"phase":"RolledBack"}`)); err != nil {
		t.Fatal(err)
	}
	if ros, err = a.Rollouts(); err != nil || string(ros["edge"]) != `{"phase":"RolledBack"}` {
		t.Errorf("rollouts after lbplane wrote again: %q, %v", ros, err)
	}
	if _, err := other.Delete(ctx, "/test/elsewhere"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rewritten and deleted records no longer reported", 10*time.Second, func() bool {
		for _, r := range a.Refused() {
			if r.Key == "/test/rollouts/edge" || r.Key == "/test/elsewhere" {
				return false
			}
		}
		return len(a.Refused()) == len(forged)-2
	})
	// A replica that starts now finds the same records refused.
	b := openEtcd(t, c, "b")
	if recs, _, err := b.List(); err != nil || len(recs) != 1 {
		t.Fatalf("a new replica lists %d records, %v", len(recs), err)
	}
	waitFor(t, "a new replica reports the same records", 10*time.Second, func() bool { return len(b.Refused()) == len(forged)-2 })
}

// Records an lbplane wrote without authentication are refused, and a replica does not start on them, until
// the operator authenticates them; then they are served. Anything that is not a record lbplane writes is
// left alone.
func TestEtcdAuthenticateOldRecords(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old := &store.Record{Namespace: "default", Name: "old", Document: []byte(`{"kind":"LoadBalancerPolicy"}`), Generation: 4, UID: "u"}
	v, _ := json.Marshal(old)
	cl := c.Client()
	for k, v := range map[string]string{"/test/policies/default/old": string(v), "/test/version": "", "/test/revocations": `[{"nodeId":"n1"}]`,
		"/test/policies/default/wrong": string(v), "/test/stray": "x"} {
		if _, err := cl.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// A replica does not start on them: it would serve its Envoys nothing.
	if _, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key,
		SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/test/"}, "replica"); err == nil || !strings.Contains(err.Error(), "lbplane store authenticate") {
		t.Fatalf("a replica on records without authentication: %v", err)
	}
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key,
		SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/test/", Passive: true}, "tool")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, _, err := s.List(); err != nil || len(recs) != 0 {
		t.Fatalf("before: %d records served, %v", len(recs), err)
	}
	sealed, left, err := s.Authenticate(true)
	if err != nil || len(sealed) != 3 || len(left) != 2 {
		t.Fatalf("dry run: would seal %v, leave %v, %v", sealed, left, err)
	}
	if recs, _, _ := s.List(); len(recs) != 0 {
		t.Fatal("a dry run wrote")
	}
	if sealed, left, err = s.Authenticate(false); err != nil || len(sealed) != 3 || !slices.Equal(left, []string{"/test/policies/default/wrong", "/test/stray"}) {
		t.Fatalf("sealed %v, left %v, %v", sealed, left, err)
	}
	recs, _, err := s.List()
	if err != nil || len(recs) != 1 || !recs[0].Equal(old) {
		t.Fatalf("after: %+v, %v", recs, err)
	}
	if rs, err := s.Revocations(); err != nil || len(rs) != 1 || rs[0].NodeID != "n1" {
		t.Fatalf("revocations after: %+v, %v", rs, err)
	}
	openEtcd(t, c, "replica") // starts now
}

// etcd in plaintext, without a client certificate, or taking clients with none is refused with a clear
// error, unless Insecure says to accept it; then it says why it is insecure.
func TestEtcdRefusedUnlessAuthenticated(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	plain := etcdtest.StartPlaintext(t, 1)
	cfg := store.EtcdConfig{Endpoints: plain.Endpoints(), SecretKey: key, Prefix: "/test/", Passive: true}
	if _, err := store.OpenEtcd(cfg, "x"); err == nil || !strings.Contains(err.Error(), "plaintext") || !strings.Contains(err.Error(), "--insecure-etcd") {
		t.Fatalf("plaintext etcd: %v", err)
	}
	cfg.Insecure = true
	s, err := store.OpenEtcd(cfg, "x")
	if err != nil {
		t.Fatalf("plaintext etcd with Insecure: %v", err)
	}
	if why := strings.Join(s.Insecure(), "; "); !strings.Contains(why, "plaintext") || !strings.Contains(why, "no client certificate") {
		t.Errorf("Insecure says %q", why)
	}
	s.Close()
	open := etcdtest.StartTLSAnyClient(t, 1)
	cfg = store.EtcdConfig{Endpoints: open.Endpoints(), CACert: open.TLS().CA, SecretKey: key, Prefix: "/test/", Passive: true}
	if _, err := store.OpenEtcd(cfg, "x"); err == nil || !strings.Contains(err.Error(), "--etcd-cert") {
		t.Fatalf("TLS without a client certificate: %v", err)
	}
	// lbplane presents a certificate, but this etcd takes clients without one.
	cfg.Cert, cfg.Key = open.TLS().Cert, open.TLS().Key
	if _, err := store.OpenEtcd(cfg, "x"); err == nil || !strings.Contains(err.Error(), "answers clients that present no certificate") {
		t.Fatalf("etcd without --client-cert-auth: %v", err)
	}
	cfg.Insecure = true
	if s, err = store.OpenEtcd(cfg, "x"); err != nil {
		t.Fatal(err)
	}
	if why := strings.Join(s.Insecure(), "; "); !strings.Contains(why, "answers clients that present no certificate") {
		t.Errorf("Insecure says %q", why)
	}
	s.Close()
	// The etcd of docs/ha.md: TLS, client certificates required. Accepted without Insecure.
	secure := etcdtest.Start(t, 1)
	cfg = store.EtcdConfig{Endpoints: secure.Endpoints(), CACert: secure.TLS().CA, Cert: secure.TLS().Cert, Key: secure.TLS().Key, SecretKey: key, Prefix: "/test/", Passive: true}
	if s, err = store.OpenEtcd(cfg, "x"); err != nil {
		t.Fatalf("etcd with client certificates: %v", err)
	}
	if why := s.Insecure(); len(why) != 0 {
		t.Errorf("a secure etcd is said insecure: %v", why)
	}
	s.Close()
}
