package lbctl_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closedPort returns a loopback address nothing listens on (it was bound, then closed).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvoyTakesEnvoyFlagsOnlyAfterDash(t *testing.T) {
	code, _, errs := run(t, "", "envoy", "--node-id", "e1", "--xds-insecure", "--envoy-path", "/bin/true", "--concurrency")
	if code == 0 || !strings.Contains(errs, "unknown flag: --concurrency") {
		t.Errorf("exit %d, stderr %q: want an unknown flag", code, errs)
	}
	code, _, errs = run(t, "", "envoy", "--node-id", "e1", "--xds-insecure", "--envoy-path", "/bin/true", "stray")
	if code == 0 || !strings.Contains(errs, `unexpected argument "stray": Envoy's own flags go after --`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// TestEnvoyRunsEnvoyWithTheBootstrap runs a stand-in for Envoy that records its arguments: lbctl envoy writes
// the bootstrap into --out-dir, passes it with --use-dynamic-base-id and the flags after --, and exits with
// Envoy's status. (A real Envoy, lbplane's certificate and the signals are e2e's TestLbctlEnvoy.)
func TestEnvoyRunsEnvoyWithTheBootstrap(t *testing.T) {
	tmp := t.TempDir()
	argsFile := filepath.Join(tmp, "args")
	fake := script(t, tmp, "envoy", `printf '%s\n' "$@" > "`+argsFile+`"; echo envoy-out; echo envoy-err >&2; exit 3`+"\n")
	out := filepath.Join(tmp, "e1")
	code, stdout, errs := run(t, "", "envoy", "--node-id", "e1", "--xds-insecure", "--xds-address", "127.0.0.1:1",
		"--envoy-path", fake, "--out-dir", out, "--", "--concurrency", "1")
	if code != 3 || !strings.Contains(errs, "error: envoy exited with status 3") {
		t.Fatalf("exit %d, stderr %q: want Envoy's status 3", code, errs)
	}
	if stdout != "envoy-out\n" || !strings.Contains(errs, "envoy-err\n") {
		t.Errorf("Envoy's output is not lbctl's: stdout %q, stderr %q", stdout, errs)
	}
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(out, "envoy.yaml")
	if got, want := string(b), strings.Join([]string{"-c", config, "--use-dynamic-base-id", "--concurrency", "1"}, "\n")+"\n"; got != want {
		t.Errorf("Envoy's arguments:\n%s\nwant:\n%s", got, want)
	}
	boot, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"e1"`, "127.0.0.1", filepath.Join(out, "admin.sock")} {
		if !strings.Contains(string(boot), want) {
			t.Errorf("bootstrap lacks %s:\n%s", want, boot)
		}
	}
	if st, err := os.Stat(config); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap mode: %v %v", st.Mode(), err)
	}
}

func TestEnvoyFindsEnvoyOrSaysHowToInstallIt(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Chdir(empty) // not in a checkout
	code, _, errs := run(t, "", "envoy", "--node-id", "e1", "--xds-insecure")
	if code == 0 || !strings.Contains(errs, "no envoy on PATH: install Envoy 1.40 and put it on PATH, or pass --envoy-path") ||
		!strings.Contains(errs, "hack/tools.sh envoy") {
		t.Errorf("exit %d, stderr %q: want how to install Envoy", code, errs)
	}
	code, _, errs = run(t, "", "envoy", "--node-id", "e1", "--xds-insecure", "--envoy-path", filepath.Join(empty, "nothing"))
	if code == 0 || !strings.Contains(errs, "error: --envoy-path: ") {
		t.Errorf("exit %d, stderr %q: want the missing --envoy-path named", code, errs)
	}

	// In a checkout (here a stand-in: go.mod of the module and hack/tools.sh), the pinned Envoy that
	// hack/tools.sh path-envoy names, once installed.
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module github.com/lbplane/lbplane\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	pinned := filepath.Join(repo, ".cache", "envoy")
	script(t, filepath.Join(repo, "hack"), "tools.sh", `[ "$1" = path-envoy ] && echo "`+pinned+`"`+"\n")
	sub := filepath.Join(repo, "work")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	code, _, errs = run(t, "", "envoy", "--node-id", "e1", "--xds-insecure")
	if code == 0 || !strings.Contains(errs, "the pinned one is not installed in "+repo+": run "+filepath.Join(repo, "hack", "tools.sh")+" envoy") {
		t.Errorf("exit %d, stderr %q: want hack/tools.sh envoy suggested", code, errs)
	}
	if err := os.MkdirAll(filepath.Dir(pinned), 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, filepath.Dir(pinned), "envoy", "exit 0\n")
	code, _, errs = run(t, "", "envoy", "--node-id", "e1", "--xds-insecure")
	if code != 0 || !strings.Contains(errs, "running "+pinned+" (pinned, ") {
		t.Errorf("exit %d, stderr %q: want the pinned Envoy run", code, errs)
	}
	// The default --out-dir is this user's state directory, made 0700, never the working directory (a files
	// root of lbplane serve, a checkout).
	state := filepath.Join(os.Getenv("XDG_STATE_HOME"), "lbplane", "envoy", "e1")
	if _, err := os.Stat(filepath.Join(state, "envoy.yaml")); err != nil {
		t.Errorf("the default --out-dir %s: %v", state, err)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the default --out-dir: %v, want mode 0700", err)
	}
	if entries, _ := os.ReadDir(sub); len(entries) != 0 {
		t.Errorf("lbctl envoy wrote into the working directory: %v", entries)
	}
}

// TestEnvoyWaitsForLbplaneBounded: lbplane's certificate is needed first; an address that refuses
// connections is waited for up to --wait-server, then named.
func TestEnvoyWaitsForLbplaneBounded(t *testing.T) {
	addr := closedPort(t)
	start := time.Now()
	code, _, errs := run(t, "", "envoy", "--node-id", "e1", "--envoy-path", "/bin/true", "--out-dir", t.TempDir(),
		"--server", "http://"+addr, "--token", "x", "--wait-server", "600ms")
	if code == 0 || !strings.Contains(errs, "error: --wait-server: lbplane at http://"+addr+" not up within 600ms: ") ||
		!strings.Contains(errs, "connection refused") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if time.Since(start) < 600*time.Millisecond {
		t.Errorf("gave up after %s, before --wait-server's 600ms", time.Since(start))
	}
}

// TestWaitServerRetriesOnlyWhileLbplaneStarts: --wait-server waits for an address that refuses connections
// and a token file not written yet, and fails at once on a refused token.
func TestWaitServerRetriesOnlyWhileLbplaneStarts(t *testing.T) {
	const tok = "s3cret"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":["invalid token"]}`))
			return
		}
		switch r.URL.Path {
		case "/v1/version":
			w.Write([]byte(`{"version":"test"}`))
		case "/v1/policies":
			w.Write([]byte(`{"items":[]}`))
		default:
			http.NotFound(w, r)
		}
	})

	t.Run("refused token fails at once", func(t *testing.T) {
		srv := httptest.NewServer(handler)
		defer srv.Close()
		start := time.Now()
		code, _, errs := run(t, "", "get", "--server", srv.URL, "--token", "wrong", "--wait-server", "60s")
		if code == 0 || !strings.Contains(errs, "invalid token") {
			t.Errorf("exit %d, stderr %q", code, errs)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("a refused token was retried for %s", d)
		}
	})

	t.Run("server and token file come up late", func(t *testing.T) {
		addr := closedPort(t)
		tokenFile := filepath.Join(t.TempDir(), "token")
		go func() {
			time.Sleep(500 * time.Millisecond)
			os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600)
			time.Sleep(500 * time.Millisecond)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return // the port was taken meanwhile: the test fails below, naming it
			}
			srv := &http.Server{Handler: handler}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}()
		code, _, errs := run(t, "", "get", "--server", "http://"+addr, "--token-file", tokenFile, "--wait-server", "60s")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
	})

	t.Run("without --wait-server a missing token file fails at once", func(t *testing.T) {
		code, _, errs := run(t, "", "get", "--server", "http://"+closedPort(t), "--token-file", filepath.Join(t.TempDir(), "token"))
		if code == 0 || !strings.Contains(errs, "error: --token-file: open ") {
			t.Errorf("exit %d, stderr %q", code, errs)
		}
	})
}
