package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteReplacesWithExactPermissions(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "tls.key")
	// A copy restored with looser permissions, held open by a reader.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
		t.Fatalf("after Write: %q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after Write over a 0644 file: %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// The reader still holds the whole old file: the new one came by a rename, not by rewriting it.
	if b, err := os.ReadFile(reader.Name()); err != nil || string(b) != "new" {
		t.Fatalf("reading the path again: %q, %v", b, err)
	}
	buf := make([]byte, 8)
	if n, _ := reader.Read(buf); string(buf[:n]) != "old" {
		t.Errorf("a reader of the old file read %q", buf[:n])
	}

	// The umask does not narrow what was asked for.
	ca := filepath.Join(dir, "ca.crt")
	if err := Write(ca, []byte("ca"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(ca); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("ca.crt: %v, %v; want 0644 under umask 077", fi.Mode().Perm(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only tls.key and ca.crt (no temporary file left)", names)
	}
}

func TestWriteIntoAMissingDirectoryFails(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "absent", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}
