package lbctl_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A policy without debug headers gives Envoy no way to say which endpoint it chose: trace --live answers
// unknown and exits 0, rather than a failed comparison.
func TestTraceLiveWithoutDebugHeadersIsUnknown(t *testing.T) {
	zones := filepath.Join(trafficDir, "zones.yaml")
	code, out, errs := run(t, "", "trace", "zones", "-f", zones, "--live", "--envoy", "http://127.0.0.1:1")
	if code != 0 || !strings.Contains(out, "Live (http://127.0.0.1:1/): unknown: the policy does not set spec.debugHeaders: true") ||
		strings.Contains(out, "DIFFERS") || strings.Contains(out, "status 0") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, "", "trace", "zones", "-f", zones, "--live", "--envoy", "http://127.0.0.1:1", "-o", "json")
	var got struct {
		Live struct {
			Verdict string `json:"verdict"`
			Agrees  bool   `json:"agrees"`
		} `json:"live"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Live.Verdict != "Unknown" || got.Live.Agrees {
		t.Errorf("exit %d, %v: %s%s", code, err, out, errs)
	}
}
