package lbplanecmd

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// A data directory migrated to etcd and back is the same: documents byte for byte, generations, times,
// uids, revocations, the CA and the tokens.
func TestStoreMigrateRoundTrip(t *testing.T) {
	c := etcdtest.Start(t, 1)
	src := t.TempDir()
	st, err := store.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	var recs []*store.Record
	for i, name := range []string{"a", "b", "c"} {
		recs = append(recs, &store.Record{Namespace: []string{"default", "default", "team-x"}[i], Name: name,
			Document:   []byte(`{"apiVersion":"lbplane.io/v1alpha1", "kind":"LoadBalancerPolicy","metadata":{"name":"` + name + `"},"spec":{"z":1,  "a":[2]}}`),
			Generation: int64(i + 3), Created: t0.Add(time.Duration(i) * time.Hour), Updated: t0.Add(time.Duration(i) * time.Minute), UID: "uid-" + name})
	}
	if _, err := st.Apply(0, recs, nil); err != nil {
		t.Fatal(err)
	}
	revs := []apiwire.Revocation{{NodeID: "n1", At: t0, Until: t0.Add(24 * time.Hour), Reason: "lost laptop"}, {Serial: "0a1b", At: t0, Until: t0.Add(time.Hour)}}
	if err := st.PutRevocations(revs); err != nil {
		t.Fatal(err)
	}
	st.Close()
	certPEM, keyPEM, err := pki.NewCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	want := &store.Secrets{CACert: certPEM, CAKey: keyPEM, Token: "admin-token-1", ReadOnlyToken: "ro-token-1"}
	if err := serve.WriteSecretsToDir(src, want); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{9}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "etcds://" + strings.TrimPrefix(c.Members()[0].Endpoint(), "https://") + "/migrated/"
	tlsFlags := []string{"--etcd-cacert", c.TLS().CA, "--etcd-cert", c.TLS().Cert, "--etcd-key", c.TLS().Key, "--etcd-secret-key-file", keyFile}
	if code := Main(append([]string{"store", "migrate", "--from", src, "--to", target}, tlsFlags...)); code != 0 {
		t.Fatalf("migrate to etcd: exit %d", code)
	}
	// A second migration into the same prefix is refused: it would merge two stores.
	if code := Main(append([]string{"store", "migrate", "--from", src, "--to", target}, tlsFlags...)); code == 0 {
		t.Fatal("a migration into a prefix that holds policies succeeded")
	}
	// Every record it wrote carries lbplane's authentication: none is left to authenticate.
	var out bytes.Buffer
	if err := runCommand(&out, append([]string{"store", "authenticate", target, "--dry-run"}, tlsFlags...)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would authenticate 0 records") {
		t.Errorf("store authenticate --dry-run after a migration:\n%s", out.String())
	}
	back := filepath.Join(t.TempDir(), "back")
	if code := Main(append([]string{"store", "migrate", "--from", target, "--to", back}, tlsFlags...)); code != 0 {
		t.Fatalf("migrate back: exit %d", code)
	}
	st, err = store.Open(back)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, _, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records came back, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !got[i].Equal(recs[i]) || !bytes.Equal(got[i].Document, recs[i].Document) || got[i].Created.Nanosecond() != recs[i].Created.Nanosecond() {
			t.Errorf("record %s changed:\n got %+v\nwant %+v", recs[i].Key(), got[i], recs[i])
		}
	}
	gotRevs, err := st.Revocations()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotRevs, revs) {
		t.Errorf("revocations changed:\n got %+v\nwant %+v", gotRevs, revs)
	}
	sec, err := serve.SecretsFromDir(back)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sec, want) {
		t.Error("the CA or tokens changed on the way")
	}
}

// runCommand runs lbplane store with args (after "store"), its output into out.
func runCommand(out *bytes.Buffer, args []string) error {
	cmd := newStore()
	cmd.SetArgs(args[1:])
	cmd.SetOut(out)
	cmd.SetErr(out)
	return cmd.Execute()
}
