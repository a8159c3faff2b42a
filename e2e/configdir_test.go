package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const dirPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: from-dir}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`

func TestConfigDirIsLoadedAndWatched(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "d1", "d2")
	dir := t.TempDir()
	port := reservePort(t)
	file := filepath.Join(dir, "policy.yaml")
	write := func(content []byte) {
		t.Helper()
		// Write and rename, as editors and git do, so the reader never sees half a file.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(policy(t, dirPolicy, map[string]any{"Port": port, "Backend": bs[0].Port}))
	l := startLbplane(t, "--config-dir", dir)
	startEnvoy(t, l, "envoy-1", true)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitServing(t, url, "d1")

	load := startLoad(url, 200, 4, time.Minute)
	write(policy(t, dirPolicy, map[string]any{"Port": port, "Backend": bs[1].Port}))
	waitServing(t, url, "d2")

	// A broken file keeps its last good version in service.
	write([]byte("apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: from-dir\n"))
	time.Sleep(2500 * time.Millisecond)
	if got := newClient(true).Spread(t, url, 50, nil); got["d2"] != 50 {
		t.Errorf("after a broken file: %v, want the last good config (all on d2)", got)
	}
	// An invalid policy likewise.
	write([]byte(strings.Replace(string(policy(t, dirPolicy, map[string]any{"Port": port, "Backend": bs[0].Port})), "protocol: HTTP", "protocol: HTTPX", 1)))
	time.Sleep(2500 * time.Millisecond)
	if got := newClient(true).Spread(t, url, 50, nil); got["d2"] != 50 {
		t.Errorf("after an invalid policy: %v, want the last good config (all on d2)", got)
	}
	load.Stop()
	load.RequireNoFailures(t, 300)

	// The API refuses to change what the directory owns.
	_, stderr, err := lbctl(t, l, string(policy(t, dirPolicy, map[string]any{"Port": port, "Backend": bs[0].Port})), "push-config", "-f", "-")
	if err == nil || !strings.Contains(stderr, "default/from-dir: managed by --config-dir") {
		t.Errorf("push over a config-dir policy: %v %s", err, stderr)
	}
	// Removing the file removes the policy.
	os.Remove(file)
	eventually(t, 10*time.Second, "the listener is gone", func() error {
		resp, err := newClient(false).HTTP.Get(url)
		if err == nil {
			resp.Body.Close()
			return fmt.Errorf("still answering %d", resp.StatusCode)
		}
		return nil
	})
}
