package e2e

// Bounded work per request and per file (issue 41, item 6): the documents-by-the-million bombs. 2,000,000
// empty YAML documents fit in a push's 8 MiB, and with the read-only token sent to /v1/diff they took
// lbplane to 2.57 GB of RSS for 27.6 s and a 56 MB answer; a 4 MiB config-dir file of "---" lines took it
// to 1.31 GB, kept after the file was removed, and wrote 524,289 ERROR lines to its log.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/serve"
)

// maxRSSGrowthMiB is the growth of lbplane's RSS over its idle baseline that one refused bomb may cause
// (docs/security.md): the 8 MiB body read once, and the documents up to manifest.MaxDocuments decoded.
const maxRSSGrowthMiB = 128

// TestAttackDocumentBombs sends each bomb through every way in that reads documents (a diff with the
// read-only token, a dry run and a push with the admin token) and drops one into the config directory:
// each is refused at manifest.MaxDocuments with one short error (one log line for the file), lbplane's RSS
// grows by less than maxRSSGrowthMiB, and returns to near its baseline afterwards.
func TestAttackDocumentBombs(t *testing.T) {
	t.Parallel()
	cfgDir := t.TempDir()
	l := &Lbplane{DataDir: t.TempDir(), extraArg: []string{"--config-dir", cfgDir}, bin: plainLbplane}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	ro, err := os.ReadFile(filepath.Join(l.DataDir, serve.ReadOnlyTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	pid := l.cmd.Process.Pid
	base := rssMiB(t, pid)
	rss := watchRSS(t, pid)

	bombs := map[string]string{
		"2,000,000 empty documents":    strings.Repeat("---\n", 2_000_000),
		"1,100,000 empty objects":      strings.Repeat("{}\n---\n", 1_100_000),
		"a policy and 20,000 comments": strings.Repeat("---\n# nothing\n", 20_000) + "---\n{}\n",
	}
	wantErr := "request: " + manifest.ErrTooManyDocuments.Error()
	for name, body := range bombs {
		if len(body) > pushapi.MaxBodyBytes {
			t.Fatalf("%s: %d bytes, over the body limit: the bomb is not the one described", name, len(body))
		}
		for _, c := range []struct{ path, token string }{
			{"/v1/diff", strings.TrimSpace(string(ro))},
			{"/v1/diff", token},
			{"/v1/policies?dryRun=true", token},
			{"/v1/policies", token},
		} {
			code, errs, size := postBomb(t, l.APIURL+c.path, c.token, body)
			what := fmt.Sprintf("%s to %s (read-only token %v)", name, c.path, c.token != token)
			t.Logf("%s: %d, %d-byte answer", what, code, size)
			if code != http.StatusRequestEntityTooLarge || len(errs) != 1 || errs[0] != wantErr {
				t.Errorf("%s: %d %q; want 413 and the one error %q", what, code, errs, wantErr)
			}
		}
	}

	// The config directory: one error, one log line, and the file's last good version kept (none here).
	bomb := filepath.Join(cfgDir, "bomb.yaml")
	if err := os.WriteFile(bomb, []byte(strings.Repeat("---\n", 4<<20/4)[:4<<20]), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the config directory's bomb is reported", func() error {
		b, _ := os.ReadFile(l.log)
		if !strings.Contains(string(b), "bomb.yaml: more than 10000 documents") {
			return fmt.Errorf("not in the log yet")
		}
		return nil
	})
	logText, _ := os.ReadFile(l.log)
	n := 0
	for _, line := range strings.Split(string(logText), "\n") {
		if strings.Contains(line, "bomb.yaml") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the log names bomb.yaml on %d lines, want one", n)
	}
	peak := rss.Stop()
	t.Logf("lbplane's RSS: %.1f MiB before the bombs, peak %.1f MiB (+%.1f)", base, peak, peak-base)
	if peak-base > maxRSSGrowthMiB {
		t.Errorf("lbplane's RSS grew by %.1f MiB (%.1f to %.1f), over the bound of %d MiB", peak-base, base, peak, maxRSSGrowthMiB)
	}
	if err := os.Remove(bomb); err != nil {
		t.Fatal(err)
	}
	// What a refused request took is given back: lbplane keeps no decoded document or error of it, and
	// returns the body's memory to the system within 10 s of the last refusal.
	var now float64
	eventually(t, time.Minute, "lbplane's RSS returns to near its baseline", func() error {
		if now = rssMiB(t, pid); now > base+maxRSSGrowthMiB/8 {
			return fmt.Errorf("RSS %.1f MiB, baseline %.1f", now, base)
		}
		return nil
	})
	t.Logf("lbplane's RSS after the bombs: %.1f MiB", now)
	if ps, err := l.Client.List(t.Context()); err != nil || len(ps) != 0 {
		t.Errorf("policies after the bombs: %d, %v; want none", len(ps), err)
	}
}

// postBomb posts body with a bearer token and returns the status, the errors of the answer and its size.
func postBomb(t *testing.T, url, token, body string) (int, []string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	var e apiwire.ErrorBody
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Errors, len(b)
}

// TestAttackWrongTokenFloodDoesNotStarveTheAdmin: a flood of wrong tokens from 127.0.0.1 (the address a
// public listener's traffic comes from when a policy routes it to the push API, and the host's own lbctl's)
// drained the per-address bucket, and the host's lbctl get with the admin token got 429s. A good token now
// draws on its own bucket: the admin's calls are all answered while the flood is throttled.
func TestAttackWrongTokenFloodDoesNotStarveTheAdmin(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--api-rate-limit", "20") // the default
	call := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, l.APIURL+"/v1/policies", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	end := time.Now().Add(6 * time.Second)
	var flood, limited atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if call("wrong-token") == http.StatusTooManyRequests {
					limited.Add(1)
				}
				flood.Add(1)
			}
		}()
	}
	// The admin, meanwhile: 4 calls a second, well under its own limit of 20.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var codes []int
	for time.Now().Before(end.Add(-time.Second)) {
		<-tick.C
		codes = append(codes, call(token))
	}
	out, errOut, err := lbctl(t, l, "", "get")
	wg.Wait()
	t.Logf("flood: %d wrong-token calls, %d refused with 429; admin: %v", flood.Load(), limited.Load(), codes)
	if limited.Load() < flood.Load()/2 {
		t.Errorf("the flood was not throttled (%d of %d refused): the test means nothing", limited.Load(), flood.Load())
	}
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("admin call %d during the flood: %d, want 200", i, c)
		}
	}
	if err != nil || strings.Contains(out+errOut, "429") {
		t.Errorf("lbctl get during the flood: %v\n%s%s", err, out, errOut)
	}
}
