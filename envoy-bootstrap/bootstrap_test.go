package envoybootstrap

import (
	"bytes"
	"strings"
	"testing"
)

// TestClusterStats: the default leaves the bootstrap as it was (all stats but update_duration), used swaps in
// the inclusion list, and anything else is refused before Envoy sees it.
func TestClusterStats(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000", AdminPort: 19000, MaxConnections: 100}
	render := func(mode string) ([]byte, error) {
		p := base
		p.ClusterStats = mode
		return Render(p)
	}
	def, err := render("")
	if err != nil {
		t.Fatal(err)
	}
	all, err := render(ClusterStatsAll)
	if err != nil || !bytes.Equal(def, all) {
		t.Fatalf("--cluster-stats all differs from the default (err %v)", err)
	}
	if !bytes.Contains(all, []byte("- suffix: .update_duration")) || bytes.Contains(all, []byte("inclusion_list")) {
		t.Errorf("all: want the update_duration exclusion only:\n%s", all)
	}
	used, err := render(ClusterStatsUsed)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inclusion_list:", "- suffix: .upstream_rq_time", "- suffix: .membership_healthy", "ejections_(?:active|enforced_"} {
		if !bytes.Contains(used, []byte(want)) {
			t.Errorf("used lacks %q", want)
		}
	}
	if bytes.Contains(used, []byte("exclusion_list")) {
		t.Error("used: a stats_matcher has one list, not both")
	}
	if _, err := render("some"); err == nil || !strings.Contains(err.Error(), "--cluster-stats") {
		t.Errorf("an unknown mode: %v", err)
	}
}
