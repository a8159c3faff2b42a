package lbplanecmd

import (
	"io"
	"strings"
	"testing"
)

// A share of Envoy's main thread outside (0, 1] is refused before anything starts, naming the flag.
func TestProxyStatsFullShareRefusesNonShares(t *testing.T) {
	for _, v := range []string{"0", "-0.5", "1.5", "NaN"} {
		cmd := newServe()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--proxy-stats-full-share", v})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--proxy-stats-full-share") || !strings.Contains(err.Error(), "at most 1") {
			t.Errorf("--proxy-stats-full-share %s: %v", v, err)
		}
	}
}
