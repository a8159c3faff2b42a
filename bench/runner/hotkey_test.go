package main

import (
	"math"
	"testing"
)

func TestSummarizeHotKey(t *testing.T) {
	backends := []string{"a", "b", "c", "d"} // four backends: backend-0 to backend-3
	home := map[string]string{"k0": "backend-0", "k1": "backend-1", "k2": "backend-2", "k3": "backend-0"}
	perKey := map[string]map[string]int{
		// The hot key: 60 requests, 40 at home (backend-0), 20 spilled to the next.
		"hot": {"backend-0": 40, "backend-1": 20},
		// k0 shares the hot home and moved; k1 stayed; k2 moved although its home is not the hot one.
		"k0": {"backend-1": 8, "backend-0": 2},
		"k1": {"backend-1": 10},
		"k2": {"backend-3": 6, "backend-2": 4},
		// k3 stayed home, on the hot key's backend.
		"k3": {"backend-0": 10},
		// Not in the baseline: counted in the spread, not in the movements.
		"k9": {"backend-2": 10},
	}
	res := hotKeyResult{HotHome: "backend-0"}
	summarizeHotKey(&res, perKey, home, backends)
	if res.Requests != 110 {
		t.Fatalf("requests %d, want 110", res.Requests)
	}
	want := map[string]int64{"backend-0": 52, "backend-1": 38, "backend-2": 14, "backend-3": 6}
	for b, n := range want {
		if res.PerBackend[b] != n {
			t.Errorf("%s served %d, want %d", b, res.PerBackend[b], n)
		}
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("busiest / mean", res.MaxOverMean, 52/(110.0/4))
	near("hot home's share", res.HotHomeShare, 52/110.0)
	near("hot key at home", res.HotKeyHome, 40/60.0)
	near("keys moved", res.KeysMoved, 2/4.0)
	near("keys moved off the hot home", res.KeysMovedOffHot, 1/2.0)
	near("requests off home", res.RequestsMoved, (8+6)/40.0)
}

func TestHotKeyRowsGroupRepetitions(t *testing.T) {
	rs := []hotKeyResult{
		{Peer: "p", Workload: "hot", Factor: 150, MaxOverMean: 1.4},
		{Peer: "p", Workload: "uniform", Factor: 0, MaxOverMean: 1.1},
		{Peer: "p", Workload: "hot", Factor: 150, MaxOverMean: 1.6, Errors: 2},
		{Peer: "p", Workload: "hot", Factor: 150, MaxOverMean: 1.5},
	}
	rows := hotKeyRows(rs)
	if len(rows) != 2 || rows[0].Workload != "uniform" {
		t.Fatalf("rows %+v: want the uniform row first, then one hot row", rows)
	}
	h := rows[1]
	if h.Runs != 3 || h.Errors != 2 || h.MaxOverMean != (stat3{Median: 1.5, Min: 1.4, Max: 1.6}) {
		t.Fatalf("hot row %+v: want 3 runs, 2 errors, busiest/mean 1.5 (1.4–1.6)", h)
	}
}
