package main

import (
	"strings"
	"testing"

	"github.com/lbplane/lbplane/bench/internal/gatewaybench"
)

// The attached routes: distinct names and paths, a quarter on host names of their own, the rest about fifteen
// to a shared name, and gwHostnames counts the names they use.
func TestGatewayFillersSpread(t *testing.T) {
	for _, n := range []int{1, 3, 4, 7, 100, 3000, 5000} {
		names, paths, hosts := map[string]bool{}, map[string]bool{}, map[string]int{}
		own := 0
		for i := range n {
			r := gwFiller(i, n)
			if names[r.name] || paths[r.path] {
				t.Fatalf("n=%d: route %d repeats a name or path (%s %s)", n, i, r.name, r.path)
			}
			names[r.name], paths[r.path] = true, true
			hosts[r.host]++
			if r.host == r.name+"."+gwDomain {
				own++
			}
			if len(r.refs) == 0 || len(r.refs) > 2 {
				t.Fatalf("n=%d: route %d has %d backends", n, i, len(r.refs))
			}
		}
		if len(hosts) != gwHostnames(n) {
			t.Errorf("n=%d: %d host names, gwHostnames says %d", n, len(hosts), gwHostnames(n))
		}
		if own != (n+3)/4 {
			t.Errorf("n=%d: %d routes on host names of their own, want %d", n, own, (n+3)/4)
		}
		if n >= 100 {
			most := 0
			for h, c := range hosts {
				if strings.HasPrefix(h, "shared-") {
					most = max(most, c)
				}
			}
			if most < 14 || most > 16 {
				t.Errorf("n=%d: a shared host name has up to %d routes, want about 15", n, most)
			}
		}
	}
}

// A loaded route's changes keep what the load asks for (host name, path, the route's own response header)
// and name only the row's Services, with positive weights.
func TestGatewayUnderLoadKeepsTheLoadsRoute(t *testing.T) {
	for _, i := range gwLoadedIndexes(3000, 20) {
		base := gwFiller(i, 3000)
		for gen := 1; gen <= 8; gen++ {
			r := gwUnderLoad(base, i, gen)
			if r.name != base.name || r.host != base.host || r.path != base.path || r.match != "" {
				t.Fatalf("route %d change %d moved what the load asks for: %+v", i, gen, r)
			}
			for _, b := range r.refs {
				if b.svc < 0 || b.svc >= gwServices || b.weight <= 0 {
					t.Fatalf("route %d change %d: backend %+v", i, gen, b)
				}
			}
			spec := r.spec()
			if f := spec.Rules[0].Filters[0]; f.ResponseHeaderModifier == nil || string(f.ResponseHeaderModifier.Set[0].Value) != r.name {
				t.Fatalf("route %d change %d: the first filter does not set %s: %+v", i, gen, gwRouteHeader, f)
			}
		}
	}
	if got := gwLoadedIndexes(5, 20); len(got) != 5 {
		t.Fatalf("more loaded routes than routes: %v", got)
	}
}

// The report of the row alone carries its tables between summary markers, as bench/summarize renders them
// from runs.jsonl (the same function, with the run named after its directory).
func TestGatewayRoutesReportHasItsTables(t *testing.T) {
	r := &report{Machine: map[string]string{}, GatewayRoutes: &gatewayRoutesPlan{Routes: 100, MemoryRoutes: 200, Samples: 2, Churn: 1e9}}
	r.Runs = []runRecord{
		{Scenario: gatewaybench.Scenario, Variant: gatewaybench.Propagation, Policies: 100, Valid: true, Samples: []float64{10, 20, 60}, PushSamples: []float64{12, 22, 61},
			Extra: map[string]float64{"hostnames": 30, "samplesWanted": 3}},
		{Scenario: gatewaybench.Scenario, Variant: gatewaybench.Churn, Policies: 100, Valid: true, Requests: 2400, RPS: 200, Extra: map[string]float64{"added": 25}},
		{Scenario: gatewaybench.Scenario, Variant: gatewaybench.UpdateUnderLoad, Policies: 100, Valid: true, Requests: 2400, Errors: 2, Extra: map[string]float64{"non2xx": 2}},
		{Scenario: gatewaybench.Scenario, Variant: gatewaybench.Memory, Policies: 200, Valid: true, LbplaneRSS: 80 << 20, Extra: map[string]float64{"idleRSS": 60 << 20}},
	}
	if !r.gatewayRoutesOnly() {
		t.Fatal("a report of the gateway-routes runs alone is not its own report")
	}
	md := r.gatewayRoutesReport("/x/results/run-1")
	for _, part := range gatewaybench.Parts {
		if !strings.Contains(md, "<!-- summary:begin kind=gateway-routes src=runs.jsonl part="+part+" -->\n| run |") {
			t.Errorf("no %s table between markers:\n%s", part, md)
		}
	}
	for _, want := range []string{"| run-1 | 100 | 30 | 3 of 3 | 20.0 / 60.0 / 60.0 / 60.0 | no |", "over the target of 50 ms", "2 failed (2 non-2xx", "none failed"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	r.Runs = append(r.Runs, runRecord{Scenario: "churn"})
	if r.gatewayRoutesOnly() {
		t.Error("a report with other rows is the row's own report")
	}
}
