package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// etcdKeyFile writes a secret key file for --etcd-secret-key-file, every byte b.
func etcdKeyFile(t *testing.T, b byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(bytes.Repeat([]byte{b}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// forgedRecord is a policy record as lbplane's store keeps it, but written by someone else: no
// authentication.
func forgedRecord(t *testing.T, name string, doc []byte) string {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&store.Record{Namespace: "default", Name: name, Document: j, Generation: 1,
		Created: time.Now(), Updated: time.Now(), UID: "forged-" + name})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAttackEtcdRecordOfAnotherWriterIsNotServed: anyone who can write lbplane's etcd prefix (here another
// client with a certificate etcd accepts) writes a new policy routing a port to their backend, and
// replaces an existing policy's record with one routing it to their backend. lbplane serves neither: the
// new policy is never listed nor sent to Envoy, the replaced one is withdrawn rather than served with the
// attacker's backend, and both records are reported (the log, lbplane_store_refused_records, lbctl status).
// A push of the policy through lbplane serves it again.
func TestAttackEtcdRecordOfAnotherWriterIsNotServed(t *testing.T) {
	t.Parallel()
	ec := etcdtest.Start(t, 1)
	l := startLbplane(t, append(ec.Flags(), "--store", "etcd", "--etcd-secret-key-file", etcdKeyFile(t, 0x42), "--replica-id", "r0")...)
	bs := startBackends(t, "honest", "attacker")
	port, evilPort := reservePort(t), reservePort(t)
	honest := policy(t, haPolicy, map[string]any{"Name": "shop", "Port": port, "Backend": bs[0].Port})
	push(t, l, honest)
	e := startEnvoy(t, l, "edge", true)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "honest")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attacker := ec.Client()
	forged := map[string]string{
		"/lbplane/policies/default/evil": forgedRecord(t, "evil", policy(t, haPolicy, map[string]any{"Name": "evil", "Port": evilPort, "Backend": bs[1].Port})),
		"/lbplane/policies/default/shop": forgedRecord(t, "shop", policy(t, haPolicy, map[string]any{"Name": "shop", "Port": port, "Backend": bs[1].Port})),
	}
	for k, v := range forged {
		if _, err := attacker.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "lbctl status reports both forged records", func() error {
		_, errOut, err := lbctl(t, l, "", "status")
		if err != nil {
			return err
		}
		for k := range forged {
			if !strings.Contains(errOut, k) {
				return fmt.Errorf("lbctl status does not name %s:\n%s", k, errOut)
			}
		}
		if !strings.Contains(errOut, "REFUSED: 2 record(s) in etcd that lbplane did not write") {
			return fmt.Errorf("lbctl status:\n%s", errOut)
		}
		return nil
	})
	if m := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort)); m["lbplane_store_refused_records{}"] != 2 {
		t.Errorf("lbplane_store_refused_records = %v, want 2", m["lbplane_store_refused_records{}"])
	}
	logs, _ := os.ReadFile(l.log)
	for k := range forged {
		if !strings.Contains(string(logs), "refused a record in etcd that lbplane did not write") || !strings.Contains(string(logs), k) {
			t.Errorf("the log does not report %s", k)
		}
	}
	// The replaced policy is withdrawn (its record is not lbplane's), never served with the attacker's backend.
	eventually(t, 20*time.Second, "the Envoy drops the listener of the replaced policy", func() error {
		if _, err := requestVia(newClient(false), url, nil); err == nil {
			return fmt.Errorf("%s still answers", url)
		}
		return nil
	})
	if out := lbctlOK(t, l, "get"); strings.Contains(out, "evil") || strings.Contains(out, "shop") {
		t.Errorf("lbctl get lists a forged policy:\n%s", out)
	}
	dump := e.ConfigDump(t)
	// Nothing of the attacker's: neither the new policy's listener nor its backend (the replaced policy's
	// listener may still be draining).
	for _, p := range []int{evilPort, bs[1].Port} {
		if strings.Contains(dump, fmt.Sprintf(`"port_value": %d`, p)) {
			t.Errorf("the Envoy's config holds port %d of a forged policy", p)
		}
	}
	for _, u := range []string{url, fmt.Sprintf("http://127.0.0.1:%d/", evilPort)} {
		if body, err := requestVia(newClient(false), u, nil); err == nil {
			t.Errorf("%s answers %q: a forged policy is served", u, body)
		}
	}
	if n := bs[1].Served.Load(); n != 0 {
		t.Errorf("the attacker's backend was sent %d requests", n)
	}
	// lbplane's own push replaces the forged record and serves the policy again.
	push(t, l, honest)
	waitServing(t, url, "honest")
	eventually(t, 20*time.Second, "only the forged new policy is still reported", func() error {
		m := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort))
		if v := m["lbplane_store_refused_records{}"]; v != 1 {
			return fmt.Errorf("lbplane_store_refused_records = %v, want 1", v)
		}
		return nil
	})
}

// TestAttackEtcdPlaintextOrOpenIsRefused: lbplane serve refuses etcd in plaintext, and etcd that takes
// clients presenting no certificate, with an error naming the reason and --insecure-etcd. With
// --insecure-etcd it starts (on a data directory that does not exist yet), and warns in its log and in
// lbctl status.
func TestAttackEtcdPlaintextOrOpenIsRefused(t *testing.T) {
	t.Parallel()
	key := etcdKeyFile(t, 0x24)
	plain := etcdtest.StartPlaintext(t, 1)
	open := etcdtest.StartTLSAnyClient(t, 1)
	for _, c := range []struct {
		what  string
		flags []string
		want  string
	}{
		{"plaintext etcd", plain.Flags(), "etcd is reached in plaintext"},
		{"etcd over TLS, lbplane without a client certificate", []string{"--etcd-endpoints", open.Endpoints()[0], "--etcd-cacert", open.TLS().CA}, "lbplane presents no client certificate"},
		{"etcd that takes clients without a certificate", open.Flags(), "answers clients that present no certificate"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--store", "etcd", "--etcd-secret-key-file", key,
			"--xds-address", "127.0.0.1:0", "--api-address", "127.0.0.1:0", "--metrics-address", ""}, c.flags...)
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "lbplane"), args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "--insecure-etcd") {
			t.Errorf("%s: lbplane serve was not refused with %q and --insecure-etcd: %v\n%s", c.what, c.want, err, out)
		}
	}
	l := &Lbplane{DataDir: filepath.Join(t.TempDir(), "fresh", "lbplane"),
		extraArg: append(plain.Flags(), "--store", "etcd", "--etcd-secret-key-file", key, "--insecure-etcd")}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	logs, _ := os.ReadFile(l.log)
	if !strings.Contains(string(logs), "INSECURE (--insecure-etcd): etcd is reached in plaintext") {
		t.Errorf("no warning in the log about plaintext etcd:\n%s", logs)
	}
	_, errOut, err := lbctl(t, l, "", "status")
	if err != nil || !strings.Contains(errOut, "--insecure-etcd: etcd is reached in plaintext") {
		t.Errorf("lbctl status does not warn of --insecure-etcd: %v\n%s", err, errOut)
	}
}
