package fileroots

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
