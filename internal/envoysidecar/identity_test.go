package envoysidecar

import (
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An init container waits while lbplane cannot give it a certificate (not running: refused connections;
// starting: 503), trying again, and stops at once at a refusal that waiting will not change (403).
func TestWaitRetriesUntilLbplaneAnswersAndStopsAtARefusal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, `{"errors":["starting"]}`, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"errors":["token: not this pod's"]}`)
	}))
	dir := t.TempDir()
	a := &Identity{TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt"), Dir: filepath.Join(dir, "tls"),
		Log: slog.New(slog.DiscardHandler)}
	if err := os.WriteFile(a.TokenFile, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not running yet: the address refuses connections for a while.
	srv.StartTLS()
	defer srv.Close()
	if err := os.WriteFile(a.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.URL = "https://127.0.0.1:1" // nothing listens
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if _, err := a.Wait(short, 100*time.Millisecond); short.Err() == nil || err == nil {
		t.Fatalf("with nothing listening Wait returned before its context ended: %v", err)
	}
	a.URL = srv.URL
	_, err := a.Wait(ctx, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "not this pod's") {
		t.Fatalf("Wait: %v, want the 403 refusal", err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d requests, want 3 (two 503 tried again, the 403 not)", n)
	}
	if lasting(&refusedError{code: http.StatusTooManyRequests}) || !lasting(&refusedError{code: http.StatusForbidden}) {
		t.Fatal("429 must be waited out and 403 must not")
	}
}
