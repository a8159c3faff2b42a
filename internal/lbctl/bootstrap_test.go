package lbctl_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/tools"
)

// lbctl bootstrap gets the node's certificate from the push API, writes it where Envoy watches it, and
// re-running it renews the files in place; the bootstrap is accepted by the real Envoy.
func TestBootstrapGetsAndRenewsTheNodeCertificate(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	url := issuingAPI(t)
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"--server", url, "--token", "admin", "bootstrap", "--node-id", "n1", "--proxy-group", "edge", "--out-dir", dir}

	code, out, errs := run(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "path_config_source") || !strings.Contains(out, filepath.Join(dir, envoybootstrap.ClientSDSFile)) {
		t.Errorf("the bootstrap does not point Envoy at the SDS files:\n%s", out)
	}
	if err := envoyAccepts(t, envoy, out); err != nil {
		t.Errorf("Envoy refuses the bootstrap: %v", err)
	}
	for _, f := range []string{envoybootstrap.KeyFile, envoybootstrap.ClientSDSFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	first, _ := os.ReadFile(filepath.Join(dir, envoybootstrap.CertFile))
	if code, _, errs := run(t, "", args...); code != 0 {
		t.Fatalf("renewal: exit %d: %s", code, errs)
	}
	second, _ := os.ReadFile(filepath.Join(dir, envoybootstrap.CertFile))
	if len(first) == 0 || string(first) == string(second) {
		t.Error("re-running did not renew the certificate")
	}

	// The wrong token gets nothing, and writes nothing.
	other := filepath.Join(t.TempDir(), "other")
	code, _, errs = run(t, "", "--server", url, "--token", "wrong", "bootstrap", "--node-id", "n1", "--out-dir", other)
	if code == 0 || !strings.Contains(errs, "wrong bearer token") {
		t.Errorf("a wrong token: exit %d %s", code, errs)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("a refused request wrote an output directory")
	}
}

// --xds-tls-dir points Envoy at credentials someone else keeps (the chart's mounted Secret) without asking
// lbplane for a certificate, and refuses to be mixed with the other sources.
func TestBootstrapXDSTLSDir(t *testing.T) {
	code, out, errs := run(t, "", "--server", "http://127.0.0.1:1", "bootstrap", "--node-id", "n1", "--xds-address", "lbplane.ns.svc:18000", "--xds-tls-dir", "/etc/envoy/tls")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`path: "/etc/envoy/tls/xds-client.json"`, `watched_directory: {path: "/etc/envoy/tls"}`, `sni: "lbplane.ns.svc"`} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap lacks %s", want)
		}
	}
	for _, extra := range [][]string{{"--xds-insecure"}, {"--out-dir", t.TempDir()}, {"--xds-tls-ca", "ca.crt"}} {
		if code, _, _ := run(t, "", append([]string{"bootstrap", "--node-id", "n1", "--xds-tls-dir", "/etc/envoy/tls"}, extra...)...); code == 0 {
			t.Errorf("--xds-tls-dir with %v was accepted", extra)
		}
	}
}

// Without --out-dir, lbctl bootstrap writes the node's key into this user's state directory (0700), never
// into the working directory, which may be a files root of lbplane serve or a git checkout; Envoy's admin
// socket goes beside it, not to a predictable name in the shared temporary directory. --embed keeps the old
// embedded form; a directory others can write is refused; a path too long for a socket gets a fresh 0700
// directory of its own.
func TestBootstrapKeepsItsFilesOutOfTheWorkingDirectory(t *testing.T) {
	url := issuingAPI(t)
	work := t.TempDir()
	t.Chdir(work)
	lbctl := func(args ...string) (int, string, string) {
		return run(t, "", append([]string{"--server", url, "--token", "admin", "bootstrap"}, args...)...)
	}

	code, out, errs := lbctl("--node-id", "kept")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dir := filepath.Join(os.Getenv("XDG_STATE_HOME"), "lbplane", "envoy", "kept")
	for _, want := range []string{filepath.Join(dir, envoybootstrap.ClientSDSFile), `pipe: {path: "` + filepath.Join(dir, "admin.sock") + `", mode: 384}`} {
		if !strings.Contains(out, want) {
			t.Errorf("the bootstrap lacks %s", want)
		}
	}
	if strings.Contains(out, "PRIVATE KEY") {
		t.Error("the key is in the bootstrap printed on stdout")
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, want a directory of mode 0700", dir, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, envoybootstrap.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key: %v, want mode 0600", err)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("lbctl bootstrap wrote into the working directory: %v", entries)
	}

	code, out, errs = lbctl("--node-id", "inline", "--embed")
	if code != 0 || !strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, envoybootstrap.ClientSDSFile) {
		t.Errorf("--embed: exit %d, %s; want the certificate and key in the bootstrap", code, errs)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_STATE_HOME"), "lbplane", "envoy", "inline", envoybootstrap.KeyFile)); err == nil {
		t.Error("--embed wrote the key into a file too")
	}
	if code, _, errs := lbctl("--node-id", "inline", "--embed", "--out-dir", t.TempDir()); code == 0 || !strings.Contains(errs, "--embed") {
		t.Errorf("--embed with --out-dir: exit %d, %s", code, errs)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := lbctl("--node-id", "open", "--out-dir", open); code == 0 || !strings.Contains(errs, "can be written by others") {
		t.Errorf("an --out-dir others can write: exit %d, %s", code, errs)
	}
	// A directory another user made first (at the name lbctl would use) is refused, not used.
	if os.Geteuid() == 0 {
		theirs := filepath.Join(os.Getenv("XDG_STATE_HOME"), "lbplane", "envoy", "squatted")
		if err := os.MkdirAll(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if code, _, errs := lbctl("--node-id", "squatted"); code == 0 || !strings.Contains(errs, "belongs to another user") {
			t.Errorf("the Envoy's directory made by another user first: exit %d, %s", code, errs)
		}
	} else {
		t.Log("not root: a directory of another user's cannot be made here, so its refusal is not checked")
	}

	runtime := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	long := strings.Repeat("n", 120)
	code, out, errs = lbctl("--node-id", long)
	if code != 0 {
		t.Fatalf("a long node id: exit %d: %s", code, errs)
	}
	socks, _ := filepath.Glob(filepath.Join(runtime, "lbplane-envoy-*"))
	if len(socks) != 1 || !strings.Contains(out, `pipe: {path: "`+filepath.Join(socks[0], "admin.sock")+`"`) {
		t.Fatalf("a node id too long for a socket in its directory: socket directories %v, bootstrap:\n%s", socks, out)
	}
	if fi, err := os.Stat(socks[0]); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, want mode 0700", socks[0], err)
	}
}

// issuingAPI serves a push API (admin token "admin") that issues Envoy certificates from a CA of the test's,
// and returns its URL.
func issuingAPI(t *testing.T) string {
	t.Helper()
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	api := &pushapi.Server{Token: "admin", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		IssueCert: func(node, group string) (*pki.Issued, error) { return ca.IssueClient(node, group, time.Hour) }}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
