package promseries

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAndSeries(t *testing.T) {
	scrape := func(text string) []Sample {
		t.Helper()
		s, err := Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := scrape("# TYPE lbplane_x gauge\nlbplane_x{status=\"True\"} 1\n# TYPE lbplane_n_total counter\nlbplane_n_total 3\n# TYPE other gauge\nother 5\n")
	second := scrape("# TYPE lbplane_x gauge\nlbplane_x{status=\"False\"} 1\n# TYPE lbplane_n_total counter\nlbplane_n_total 7\n")
	third := scrape("# TYPE lbplane_n_total counter\nlbplane_n_total 9\n")
	for _, s := range first {
		if s.Name == "lbplane_n_total" && !s.Counter {
			t.Errorf("a counter read as %+v", s)
		}
	}
	got := Series([][]Sample{first, second, third}, map[string]string{"job": "j", "status": "target's"}, map[string]bool{"lbplane_x": true, "lbplane_n_total": true}, 2)
	want := []map[string]string{
		{"series": `lbplane_n_total{job="j",status="target's"}`, "values": "3 7 9 9x2"},
		{"series": `lbplane_x{job="j",status="False"}`, "values": "_ 1 stale _x2"},
		{"series": `lbplane_x{job="j",status="True"}`, "values": "1 stale _ _x2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Series:\n got %v\nwant %v", got, want)
	}
}

func TestFamilies(t *testing.T) {
	got := Families(`sum by (namespace, name) (rate(envoy_cluster_upstream_rq_xx{envoy_response_code_class="5"}[5m]) * on (envoy_cluster_name) group_left (name) lbplane_cluster_info) / level:lbplane_requests:rate5m > 0 and up{job="x"}`)
	if want := []string{"envoy_cluster_upstream_rq_xx", "lbplane_cluster_info"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Families: %v, want %v", got, want)
	}
}
