package serve

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokensAreGeneratedOncePrivateAndDistinct(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{DataDir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	admin, ro, err := loadTokens(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if admin == "" || ro == "" || admin == ro {
		t.Fatalf("tokens %q and %q", admin, ro)
	}
	for file, want := range map[string]string{TokenFile: admin, ReadOnlyTokenFile: ro} {
		p := filepath.Join(dir, file)
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", file, info.Mode().Perm())
		}
		if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != want {
			t.Errorf("%s holds %q", file, b)
		}
	}
	// Loosened by a copy or restore: tightened again, and the same tokens are kept.
	os.Chmod(filepath.Join(dir, ReadOnlyTokenFile), 0o644)
	admin2, ro2, err := loadTokens(cfg)
	if err != nil || admin2 != admin || ro2 != ro {
		t.Errorf("second start: %q %q %v", admin2, ro2, err)
	}
	if info, _ := os.Stat(filepath.Join(dir, ReadOnlyTokenFile)); info.Mode().Perm() != 0o600 {
		t.Errorf("a loosened token file stays %v", info.Mode().Perm())
	}
	cfg.Token, cfg.ReadOnlyToken = "same", "same"
	if _, _, err := loadTokens(cfg); err == nil {
		t.Error("equal admin and read-only tokens were accepted")
	}
}

func TestPlaintextAPIOnlyOnLoopback(t *testing.T) {
	cfg := &Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	listen := func(addr string) net.Listener {
		t.Helper()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	if err := checkAPIListener(cfg, listen("127.0.0.1:0"), false); err != nil {
		t.Errorf("loopback refused: %v", err)
	}
	any := listen("0.0.0.0:0")
	if err := checkAPIListener(cfg, any, false); err == nil || !strings.Contains(err.Error(), "--api-insecure-listen-any") {
		t.Errorf("plaintext on 0.0.0.0: %v", err)
	}
	if err := checkAPIListener(cfg, any, true); err != nil {
		t.Errorf("TLS on 0.0.0.0 refused: %v", err)
	}
	cfg.APIInsecureListenAny = true
	if err := checkAPIListener(cfg, any, false); err != nil {
		t.Errorf("plaintext on 0.0.0.0 with --api-insecure-listen-any: %v", err)
	}
}
