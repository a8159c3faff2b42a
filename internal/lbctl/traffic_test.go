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
	if code, _, errs := run(t, "", "whatif", "zones", "-f", zones, "--down", "zone=nowhere"); code == 0 || !strings.Contains(errs, "no endpoint") {
		t.Errorf("an unknown zone: exit %d, %s", code, errs)
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
