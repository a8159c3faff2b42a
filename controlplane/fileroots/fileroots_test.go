package fileroots

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pki"
)

func TestReadFileOnlyUnderRoots(t *testing.T) {
	base := t.TempDir()
	rootA := filepath.Join(base, "a")
	rootB := filepath.Join(base, "b")
	outside := filepath.Join(base, "outside")
	data := filepath.Join(base, "data")
	for _, d := range []string{rootA, rootB, outside, filepath.Join(rootA, "sub"), filepath.Join(data, "certs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(rootA, "a.pem"), "A")
	write(filepath.Join(rootA, "sub", "s.pem"), "S")
	write(filepath.Join(rootB, "b.pem"), "B")
	write(filepath.Join(outside, "secret.key"), "SECRET")
	write(filepath.Join(data, "token"), "TOKEN")
	write(filepath.Join(data, "certs", "c.pem"), "C")
	write(filepath.Join(rootA, "big.pem"), strings.Repeat("x", MaxFileBytes+1))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "secret.key"), filepath.Join(rootA, "out-abs")))
	must(os.Symlink("../outside/secret.key", filepath.Join(rootA, "out-rel")))
	must(os.Symlink("sub/s.pem", filepath.Join(rootA, "in-link")))
	must(os.Symlink(outside, filepath.Join(rootA, "dir-out")))
	must(syscall.Mkfifo(filepath.Join(rootA, "fifo"), 0o600))
	// A root that contains the data directory must still not serve the token, but <data-dir>/certs is a
	// root of its own.
	rs, err := Open([]string{rootA, rootB, base, filepath.Join(data, "certs")}, data)
	must(err)
	defer rs.Close()

	ok := map[string]string{
		"a.pem":                               "A",
		"sub/s.pem":                           "S",
		"in-link":                             "S",
		filepath.Join(rootA, "a.pem"):         "A",
		filepath.Join(rootB, "b.pem"):         "B",
		filepath.Join(rootA, "sub/../a.pem"):  "A",
		filepath.Join(data, "certs", "c.pem"): "C",
		filepath.Join(base, "b", "b.pem"):     "B",
	}
	for p, want := range ok {
		got, err := rs.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	refused := []string{
		"",
		"missing.pem",
		"../outside/secret.key",
		"sub/../../outside/secret.key",
		"out-abs",
		"out-rel",
		"dir-out/secret.key",
		"fifo",
		"sub",
		"/dev/zero",
		"/etc/passwd",
		filepath.Join(rootA, "missing.pem"),
		filepath.Join(data, "token"),
		filepath.Join(base, "data", "token"),
		"a.pem\x00",
	}
	for _, p := range refused {
		start := time.Now()
		got, err := rs.ReadFile(p)
		if !errors.Is(err, ErrNotReadable) || got != nil {
			t.Errorf("ReadFile(%q) = %q, %v; want ErrNotReadable", p, got, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("ReadFile(%q) took %s", p, d)
		}
	}
	if _, err := rs.ReadFile("big.pem"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file over the cap: %v, want ErrTooLarge", err)
	}
}

func TestOpenNeedsExistingRoots(t *testing.T) {
	if _, err := Open(nil); err == nil {
		t.Error("no roots accepted")
	}
	if _, err := Open([]string{filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing root accepted")
	}
}

func TestRefuse(t *testing.T) {
	if _, err := Refuse("/anything"); !errors.Is(err, ErrKubernetes) {
		t.Errorf("Refuse: %v", err)
	}
}

// The layout the README starts with: lbplane serve --data-dir ./data --files-root . from one directory. The
// data directory's exclusion must hold although both were given as relative names.
func TestRelativeRootAndDataDir(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	if err := os.MkdirAll(filepath.Join("data", "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("data", "pki", "ca.key"), []byte("CA KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("app.crt", []byte("APP"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, deny := range []string{"data", "./data", "data/", "./data/../data"} {
		rs, err := Open([]string{"."}, deny)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"data/pki/ca.key", "./data/pki/ca.key", filepath.Join(base, "data", "pki", "ca.key"), "data/../data/pki/ca.key"} {
			if got, err := rs.ReadFile(p); !errors.Is(err, ErrNotReadable) {
				t.Errorf("deny %q: ReadFile(%q) = %q, %v; want ErrNotReadable", deny, p, got, err)
			}
		}
		if got, err := rs.ReadFile("app.crt"); err != nil || string(got) != "APP" {
			t.Errorf("deny %q: ReadFile(app.crt) = %q, %v", deny, got, err)
		}
		rs.Close()
	}
}

// A protected file is refused by identity: through a hard link inside a root, a bind-like second root
// naming the same directory, or a symlink inside the root; and a file renewed by rename is still protected.
func TestProtectedByIdentity(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	keys := filepath.Join(base, "keys")
	for _, d := range []string{root, keys} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(keys, "ca.key")
	if err := os.WriteFile(key, []byte("CA KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(key, filepath.Join(root, "innocent.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ok.pem"), []byte("OK"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The keys directory is also a root (as "/" or a parent directory would make it), under another name.
	if err := os.Symlink(keys, filepath.Join(base, "keys-link")); err != nil {
		t.Fatal(err)
	}
	rs, err := Open([]string{root, filepath.Join(base, "keys-link")})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if got, err := rs.ReadFile("innocent.pem"); err != nil || string(got) != "CA KEY" {
		t.Fatalf("before Protect, the link reads as any file: %q, %v", got, err)
	}
	if err := rs.Protect(key, filepath.Join(keys, "token")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"innocent.pem", filepath.Join(root, "innocent.pem"), filepath.Join(base, "keys-link", "ca.key"), filepath.Join(keys, "ca.key")} {
		if got, err := rs.ReadFile(p); !errors.Is(err, ErrNotReadable) || got != nil {
			t.Errorf("ReadFile(%q) = %q, %v; want ErrNotReadable", p, got, err)
		}
	}
	if got, err := rs.ReadFile("ok.pem"); err != nil || string(got) != "OK" {
		t.Errorf("ReadFile(ok.pem) = %q, %v", got, err)
	}
	// A protected path created after Protect, and a key renewed by rename (a new inode), are protected too.
	tok := filepath.Join(keys, "token")
	if err := os.WriteFile(tok, []byte("TOKEN"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tok, filepath.Join(root, "tok.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.ReadFile("tok.pem"); !errors.Is(err, ErrNotReadable) {
		t.Errorf("a link to a token created after Protect: %v, want ErrNotReadable", err)
	}
	if err := os.WriteFile(key+".new", []byte("NEW KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(key+".new", filepath.Join(root, "renewed.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(key+".new", key); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.ReadFile("renewed.pem"); !errors.Is(err, ErrNotReadable) {
		t.Errorf("a link to the renewed key: %v, want ErrNotReadable", err)
	}
}

// A key lbplane issued is refused by what it is: as written, copied, hard-linked, through a symlink and by
// relative or dotted names, with the same error as a missing file; other files of the root are served.
func TestIssuedKeyRefusedWhateverThePath(t *testing.T) {
	base := t.TempDir()
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(base, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pki.OpenOwnKeys("")
	if err != nil {
		t.Fatal(err)
	}
	ca.Keys = keys
	keys.TrustCA(ca)
	is, err := ca.IssueClient("envoy-1", "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "envoy-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(root, "envoy-1", "tls.key")
	for p, data := range map[string][]byte{key: is.KeyPEM, filepath.Join(root, "copy.pem"): is.KeyPEM,
		filepath.Join(root, "envoy-1", "tls.crt"): is.CertPEM, filepath.Join(root, "ca.crt"): ca.CertPEM} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(key, filepath.Join(root, "hard.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("envoy-1/tls.key", filepath.Join(root, "sym.pem")); err != nil {
		t.Fatal(err)
	}
	rs, err := Open([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rs.RefuseContent(keys.Refuses)
	for _, p := range []string{"./envoy-1/tls.key", "envoy-1/tls.key", "envoy-1/../envoy-1/tls.key", key, "copy.pem", "hard.pem", "sym.pem", "envoy-1/tls.crt"} {
		if got, err := rs.ReadFile(p); !errors.Is(err, ErrNotReadable) || got != nil {
			t.Errorf("ReadFile(%q) = %d bytes, %v; want ErrNotReadable", p, len(got), err)
		}
	}
	if got, err := rs.ReadFile("ca.crt"); err != nil || string(got) != string(ca.CertPEM) {
		t.Errorf("the CA's certificate (public) is refused: %v", err)
	}
}
