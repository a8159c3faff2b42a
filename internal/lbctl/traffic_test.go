package lbctl_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

var trafficDir = filepath.Join("testdata", "traffic")

// TestDiffTrafficOffline: adding a fifth Maglev endpoint gives each a fifth of the keys and moves about a
// fifth of them (Maglev's minimal disruption); the text names both, and the exit status says traffic moves.
func TestDiffTrafficOffline(t *testing.T) {
	code, out, errs := run(t, "", "diff", "--traffic", "--from", filepath.Join(trafficDir, "old.yaml"), "-f", filepath.Join(trafficDir, "new.yaml"), "-o", "json")
	if code != 1 || errs != "" {
		t.Fatalf("exit %d (want 1), stderr %s", code, errs)
	}
	var pvs []trafficmodel.Preview
	if err := listItems(out, &pvs); err != nil || len(pvs) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	pv := pvs[0]
	if len(pv.Changes) != 5 || pv.Changes[4].State != "added" || len(pv.Movements) != 1 {
		t.Fatalf("%+v", pv)
	}
	for _, c := range pv.Changes[:4] {
		if c.Before < 0.24 || c.Before > 0.26 || c.After < 0.19 || c.After > 0.21 {
			t.Errorf("%s: %.3f -> %.3f, want about 0.25 -> 0.20", c.Address, c.Before, c.After)
		}
	}
	if m := pv.Movements[0].Moved; m < 0.19 || m > 0.23 {
		t.Errorf("%.3f of keys move; Maglev moves about the new endpoint's fifth", m)
	}
	_, text, _ := run(t, "", "diff", "--traffic", "--from", filepath.Join(trafficDir, "old.yaml"), "-f", filepath.Join(trafficDir, "new.yaml"))
	if !strings.Contains(text, "hash keys that move to another endpoint") || !strings.Contains(text, "added") {
		t.Errorf("text output:\n%s", text)
	}
	if code, _, _ := run(t, "", "diff", "--traffic", "--from", filepath.Join(trafficDir, "old.yaml"), "-f", filepath.Join(trafficDir, "old.yaml")); code != 0 {
		t.Errorf("an unchanged policy: exit %d, want 0", code)
	}
}

// TestWhatIfAndTraceOffline: zone-a losing 2 of 5 endpoints keeps 140×3/5 = 84 % there and sends 16 % to
// zone-b; trace then shows the level loads and the skipped endpoints.
func TestWhatIfAndTraceOffline(t *testing.T) {
	zones := filepath.Join(trafficDir, "zones.yaml")
	code, out, errs := run(t, "", "whatif", "zones", "-f", zones, "--down", "endpoint=10.0.1.1:8080", "--down", "endpoint=10.0.1.2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var pvs []trafficmodel.Preview
	if err := listItems(out, &pvs); err != nil {
		t.Fatal(err)
	}
	zoneB := 0.0
	for _, c := range pvs[0].Changes {
		if c.Zone == "zone-b" {
			zoneB += c.After
		}
	}
	if zoneB < 0.159 || zoneB > 0.161 {
		t.Errorf("zone-b gets %.3f, want 0.16", zoneB)
	}
	code, out, _ = run(t, "", "trace", "zones", "-f", zones, "--down", "zone=zone-a")
	if code != 0 || !strings.Contains(out, "skipped 10.0.1.5:8080: what-if: zone zone-a down") || !strings.Contains(out, "10.0.2.1:8080: 50.0%") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if code, _, errs := run(t, "", "whatif", "zones", "-f", zones, "--down", "zone=nowhere"); code == 0 || !strings.Contains(errs, "--down: zone nowhere: no endpoint of default/zones") {
		t.Errorf("an unknown zone: exit %d, %s", code, errs)
	}
}

// TestBackupEndpointsPredicted is examples/backup-endpoints.yaml as a user tries it: with both primaries
// healthy the backup gets nothing (failoverThreshold 100 makes the overprovisioning factor 100, so one
// primary down already moves half the traffic), and with both down it gets everything.
func TestBackupEndpointsPredicted(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "backup-endpoints.yaml")
	code, out, errs := run(t, "", "trace", "backup", "-f", example, "-o", "json")
	if code != 0 {
		t.Fatalf("trace: exit %d: %s", code, errs)
	}
	var tr trafficmodel.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil || len(tr.Backends) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, c := range tr.Backends[0].Candidates {
		got[c.Address] = c.Probability
	}
	if got["127.0.0.1:18083"] != 0 || got["127.0.0.1:18081"] != 0.5 || got["127.0.0.1:18082"] != 0.5 {
		t.Errorf("all healthy: %v, want 0.5, 0.5 and nothing to the backup", got)
	}
	if lv := tr.Backends[0].Levels; len(lv) != 2 || lv[0].Load != 100 || lv[1].Load != 0 || !lv[1].Backup || lv[0].Backup {
		t.Errorf("levels %+v", lv)
	}
	_, text, _ := run(t, "", "trace", "backup", "-f", example)
	if !strings.Contains(text, "1 (backup)") || !strings.Contains(text, "round robin") {
		t.Errorf("trace text names neither the backup level nor why the pick is not known:\n%s", text)
	}
	share := func(args ...string) map[string]float64 {
		t.Helper()
		code, out, errs := run(t, "", append([]string{"whatif", "backup", "-f", example, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("whatif %v: exit %d: %s", args, code, errs)
		}
		m := map[string]float64{}
		for _, c := range onePreview(t, out).Changes {
			m[c.Address] = c.After
			if c.Address == "127.0.0.1:18083" && !c.Backup {
				t.Errorf("the backup endpoint is not marked: %+v", c)
			}
		}
		return m
	}
	if m := share("--down", "endpoint=127.0.0.1:18081", "--down", "endpoint=127.0.0.1:18082"); m["127.0.0.1:18083"] != 1 || m["127.0.0.1:18081"] != 0 {
		t.Errorf("both primaries down: %v, want everything to the backup", m)
	}
	if m := share("--down", "endpoint=127.0.0.1:18081"); m["127.0.0.1:18082"] != 0.5 || m["127.0.0.1:18083"] != 0.5 {
		t.Errorf("one primary down, failoverThreshold 100: %v, want half to the backup", m)
	}
}

// TestPathAndHostHashPredicted is examples/hash-path-and-host.yaml: the path (without its query by
// default) and the Host are hash inputs, so the trace names one endpoint, the same for two queries of
// one path; a request without a hash input is said to be random.
func TestPathAndHostHashPredicted(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "hash-path-and-host.yaml")
	trace := func(name string, args ...string) trafficmodel.Trace {
		t.Helper()
		code, out, errs := run(t, "", append([]string{"trace", name, "-f", example, "-o", "json"}, args...)...)
		return oneBackendTrace(t, code, out, errs)
	}
	a, b := trace("hash-path", "--path", "/img/a.png?v=2"), trace("hash-path", "--path", "/img/a.png?v=3")
	if a.Hash == nil || !a.Hash.Present || a.Backends[0].Endpoint == "" || a.Hash.Parts[0].Value != "/img/a.png" {
		t.Fatalf("path hashing is not predicted as sticky: %+v %+v", a.Hash, a.Backends[0])
	}
	if a.Backends[0].Endpoint != b.Backends[0].Endpoint || a.Hash.Value != b.Hash.Value {
		t.Errorf("withQuery false: two queries of one path hash apart: %s and %s", a.Backends[0].Endpoint, b.Backends[0].Endpoint)
	}
	h := trace("hash-host", "--header", "host=shop.example", "--path", "/x?y=1")
	if h.Hash == nil || !h.Hash.Present || h.Backends[0].Endpoint == "" || len(h.Hash.Parts) != 1 || h.Hash.Parts[0].Value != "shop.example" {
		t.Errorf("host hashing (terminal): %+v %+v", h.Hash, h.Backends[0])
	}
	n := trace("hash-host", "--path", "/x?y=1")
	if n.Hash == nil || n.Hash.Parts[1].Value != "/x?y=1" || n.Backends[0].Endpoint == "" {
		t.Errorf("without a Host the path with its query is hashed: %+v", n.Hash)
	}
}

// listItems decodes the items of a list printed with -o json (kind List, as kubectl prints lists).
func listItems(out string, items any) error {
	var l struct {
		Kind  string          `json:"kind"`
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return err
	}
	if l.Kind != "List" {
		return fmt.Errorf("kind %q, want List", l.Kind)
	}
	return json.Unmarshal(l.Items, items)
}

// onePreview decodes the one preview whatif or diff --traffic printed with -o json.
func onePreview(t *testing.T, out string) trafficmodel.Preview {
	t.Helper()
	var pvs []trafficmodel.Preview
	if err := listItems(out, &pvs); err != nil || len(pvs) != 1 {
		t.Fatalf("want one preview: %v\n%s", err, out)
	}
	return pvs[0]
}

// oneBackendTrace decodes what lbctl trace -o json printed (exit code, standard output and error) about a
// route of one backend.
func oneBackendTrace(t *testing.T, code int, out, errs string) trafficmodel.Trace {
	t.Helper()
	if code != 0 {
		t.Fatalf("trace: exit %d: %s", code, errs)
	}
	var tr trafficmodel.Trace
	if err := json.Unmarshal([]byte(out), &tr); err != nil || len(tr.Backends) != 1 {
		t.Fatalf("want a trace of one backend: %v\n%s", err, out)
	}
	return tr
}

// TestRoutesEnvoyAnswersPredicted is examples/route-actions.yaml: trace says that a redirect and a direct
// response reach no backend, and names the error share of a route whose weights include it, which whatif
// leaves out of every endpoint's share (Envoy answers it 500).
func TestRoutesEnvoyAnswersPredicted(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "route-actions.yaml")
	trace := func(path string) trafficmodel.Trace {
		t.Helper()
		code, out, errs := run(t, "", "trace", "route-actions", "-f", example, "--path", path, "-o", "json")
		if code != 0 {
			t.Fatalf("trace %s: exit %d: %s", path, code, errs)
		}
		var tr trafficmodel.Trace
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return tr
	}
	if tr := trace("/old/x"); tr.Answer != "Envoy answers with a redirect" || len(tr.Backends) != 0 {
		t.Errorf("/old/x: answer %q, backends %+v", tr.Answer, tr.Backends)
	}
	if tr := trace("/maintenance"); tr.Answer != "Envoy answers 503 itself" || len(tr.Backends) != 0 {
		t.Errorf("/maintenance: answer %q, backends %+v", tr.Answer, tr.Backends)
	}
	tr := trace("/beta")
	if len(tr.Backends) != 2 || tr.Backends[1].Note != trafficmodel.ErrorShareNote || tr.Backends[1].Probability != 0.1 || tr.Backends[0].Probability != 0.9 {
		t.Errorf("/beta: %+v", tr.Backends)
	}
	code, out, errs := run(t, "", "whatif", "route-actions", "-f", example, "--down", "endpoint=127.0.0.1:18082", "-o", "json")
	if code != 0 {
		t.Fatalf("whatif: exit %d: %s", code, errs)
	}
	for _, c := range onePreview(t, out).Changes {
		if strings.HasSuffix(c.Route, "/beta") && c.After != 0.9 {
			t.Errorf("beta's endpoint gets %v of the route, want 0.9 (the rest is the error share)", c.After)
		}
	}
}
