package trafficmodel

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lbplane/lbplane/controlplane/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/owners.json from the current model")

func cluster(algo ir.Algorithm, zones []string, failover []string, weights ...uint32) *ir.Cluster {
	c := &ir.Cluster{Name: "c", Algorithm: algo, ZoneFailover: failover}
	for i, w := range weights {
		z := ""
		if zones != nil {
			z = zones[i]
		}
		c.Endpoints = append(c.Endpoints, ir.Endpoint{Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8080, Weight: w, Zone: z})
	}
	return c
}

func downFirst(n int) Down {
	d := Down{}
	for i := 1; i <= n; i++ {
		d[fmt.Sprintf("10.0.0.%d:8080", i)] = "test"
	}
	return d
}

func ones(n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func zonesOf(a, b int) []string {
	z := make([]string, 0, a+b)
	for i := 0; i < a; i++ {
		z = append(z, "a")
	}
	for i := 0; i < b; i++ {
		z = append(z, "b")
	}
	return z
}

// TestPriorityLoad holds the model to the table in Envoy's docs (intro/arch_overview/upstream/
// load_balancing/priority): with an overprovisioning factor of 1.4, a P0 that is 100 %, 72 %, 71 %, 50 %,
// 25 % and 0 % healthy gets 100, 100, 99, 70, 35 and 0 % of the load, the rest going to a healthy P1; and
// to Envoy's panic rules (threshold 50 % by default; total panic spreads load by endpoint count).
func TestPriorityLoad(t *testing.T) {
	threshold0 := 0.0
	cases := []struct {
		name        string
		a, b, downA int
		downB       int
		threshold   *float64
		load        []uint32
		panic       []bool
		totalPanic  bool
	}{
		{name: "P0 100% healthy", a: 100, b: 10, downA: 0, load: []uint32{100, 0}, panic: []bool{false, false}},
		{name: "P0 72% healthy", a: 100, b: 10, downA: 28, load: []uint32{100, 0}, panic: []bool{false, false}},
		{name: "P0 71% healthy", a: 100, b: 10, downA: 29, load: []uint32{99, 1}, panic: []bool{false, false}},
		{name: "P0 50% healthy", a: 100, b: 10, downA: 50, load: []uint32{70, 30}, panic: []bool{false, false}},
		{name: "P0 25% healthy", a: 100, b: 10, downA: 75, load: []uint32{35, 65}, panic: []bool{false, false}},
		{name: "P0 0% healthy", a: 100, b: 10, downA: 100, load: []uint32{0, 100}, panic: []bool{false, false}},
		{name: "zone a loses 2 of 5", a: 5, b: 2, downA: 2, load: []uint32{84, 16}, panic: []bool{false, false}},
		// 140×1/5 = 28 and 140×1/2 = 70: 98 % available, so panic is possible; P0 is 20 % healthy (below 50).
		// Loads 28×100/98 = 28 and 70×100/98 = 71; the 1 left over goes to the first available level.
		{name: "P0 in panic, P1 not", a: 5, b: 2, downA: 4, downB: 1, load: []uint32{29, 71}, panic: []bool{true, false}},
		// Everything below the threshold: load by endpoint count, 5/7 = 71 and 2/7 = 28, the 1 left to P0.
		{name: "total panic", a: 5, b: 2, downA: 4, downB: 2, load: []uint32{72, 28}, panic: []bool{true, true}, totalPanic: true},
		{name: "panic off, all down", a: 5, b: 2, downA: 5, downB: 2, threshold: &threshold0, load: []uint32{100, 0}, panic: []bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(ir.RoundRobin, zonesOf(tc.a, tc.b), []string{"a", "b"}, ones(tc.a+tc.b)...)
			c.PanicThreshold = tc.threshold
			down := downFirst(tc.downA)
			for i := 0; i < tc.downB; i++ {
				down[fmt.Sprintf("10.0.0.%d:8080", tc.a+i+1)] = "test"
			}
			m := model(c, down)
			var load []uint32
			var panic []bool
			for _, l := range m.Levels {
				load = append(load, l.Load)
				panic = append(panic, l.Panic)
			}
			if fmt.Sprint(load) != fmt.Sprint(tc.load) || fmt.Sprint(panic) != fmt.Sprint(tc.panic) || m.TotalPanic != tc.totalPanic {
				t.Errorf("load %v panic %v total %v; want %v %v %v", load, panic, m.TotalPanic, tc.load, tc.panic, tc.totalPanic)
			}
		})
	}
}

func TestSharesFollowWeightsHealthAndPanic(t *testing.T) {
	cases := []struct {
		name    string
		weights []uint32
		down    int
		want    []float64
	}{
		{"weighted", []uint32{1, 2, 3, 4}, 0, []float64{0.1, 0.2, 0.3, 0.4}},
		{"one down", []uint32{1, 1, 1, 1}, 1, []float64{0, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		// 2 of 5 healthy is 40 %, below the 50 % threshold: Envoy balances over all five.
		{"panic", []uint32{1, 1, 1, 1, 1}, 3, []float64{0.2, 0.2, 0.2, 0.2, 0.2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := model(cluster(ir.RoundRobin, nil, nil, tc.weights...), downFirst(tc.down)).Shares()
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("shares %v, want %v", got, tc.want)
				}
			}
		})
	}
	// Zones without failover share one level: weights alone count.
	m := model(cluster(ir.RoundRobin, zonesOf(1, 3), nil, 1, 1, 1, 1), nil)
	if len(m.Levels) != 1 || math.Abs(m.Shares()[0]-0.25) > 1e-9 {
		t.Errorf("zones without failover: %d levels, shares %v", len(m.Levels), m.Shares())
	}
}

// TestRingSize follows Envoy's scaling: the lightest host gets ceil(its weight × min ring size) entries.
func TestRingSize(t *testing.T) {
	r := newRing(model(cluster(ir.RingHash, nil, nil, 1, 1, 1), nil).normalized([]int{0, 1, 2}), 1024, 8<<20)
	if len(r.entries) != 1026 {
		t.Errorf("3 equal hosts, min 1024: %d entries, want 3 × ceil(1024/3) = 1026", len(r.entries))
	}
	r = newRing(model(cluster(ir.RingHash, nil, nil, 1, 2), nil).normalized([]int{0, 1}), 1024, 8<<20)
	count := map[int]int{}
	for _, e := range r.entries {
		count[e.host]++
	}
	if count[0] != 342 || count[1] != 684 {
		t.Errorf("weights 1:2, min 1024: %v entries, want 342 and 684", count)
	}
	r = newRing(model(cluster(ir.RingHash, nil, nil, 1, 2), nil).normalized([]int{0, 1}), 1024, 300)
	if len(r.entries) != 300 {
		t.Errorf("max 300: %d entries", len(r.entries))
	}
}

// TestMaglevTable: equal weights take turns, so every host owns the same number of slots, give or take one.
func TestMaglevTable(t *testing.T) {
	m := model(cluster(ir.Maglev, nil, nil, 1, 1, 1, 1, 1, 1, 1), nil)
	sh := m.Shares()
	for _, s := range sh {
		if math.Abs(s*DefaultMaglevTableSize-float64(DefaultMaglevTableSize)/7) > 1 {
			t.Errorf("slots per host %v", sh)
		}
	}
	w := model(cluster(ir.Maglev, nil, nil, 1, 3), nil).Shares()
	if math.Abs(w[0]-0.25) > 0.001 || math.Abs(w[1]-0.75) > 0.001 {
		t.Errorf("weights 1:3: %v", w)
	}
}

// TestRemovingAHostMovesItsKeys: every key of a removed host moves. Maglev moves few others. A ring moves
// more: Envoy sizes it so that each host gets ceil(min size / hosts) entries, so with fewer hosts the others
// get more entries, which take keys from each other too (5 hosts: 205 entries each; 4: 256).
func TestRemovingAHostMovesItsKeys(t *testing.T) {
	hashes := SampleHashes(50_000)
	for _, algo := range []ir.Algorithm{ir.RingHash, ir.Maglev} {
		before := model(cluster(algo, nil, nil, 1, 1, 1, 1, 1), nil)
		c := cluster(algo, nil, nil, 1, 1, 1, 1, 1)
		c.Endpoints = c.Endpoints[1:]
		after := model(c, nil)
		moved, share := MovedKeys(before, after, hashes), before.Shares()[0]
		most := share + 0.02
		if algo == ir.RingHash {
			most = share + 0.15
		}
		if moved < share-0.01 || moved > most {
			t.Errorf("%s: %.3f of keys moved; the removed host owned %.3f", algo, moved, share)
		}
		if same := MovedKeys(before, model(cluster(algo, nil, nil, 1, 1, 1, 1, 1), nil), hashes); same != 0 {
			t.Errorf("%s: %.3f moved between identical configs", algo, same)
		}
	}
}

// TestOwnersGolden pins the owners of a fixed set of keys, for ring hash and Maglev. The e2e test
// TestPreviewHashOwnersAndMovedKeysMatchEnvoy checks the same model against the real Envoy; this file
// catches a change to the model without Envoy at hand.
func TestOwnersGolden(t *testing.T) {
	got := map[string][]string{}
	for _, algo := range []ir.Algorithm{ir.RingHash, ir.Maglev} {
		m := model(cluster(algo, nil, nil, 1, 1, 2, 1, 3), nil)
		for i := 0; i < 40; i++ {
			o, _ := m.Owner(xxhash.Sum64String(fmt.Sprintf("user-%d", i)))
			got[string(algo)] = append(got[string(algo)], m.Hosts[o].Address)
		}
	}
	path := filepath.Join("testdata", "owners.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", " ")
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	var want map[string][]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for algo, w := range want {
		for i := range w {
			if got[algo][i] != w[i] {
				t.Errorf("%s user-%d: owner %s, golden %s", algo, i, got[algo][i], w[i])
			}
		}
	}
}

func TestRequestHash(t *testing.T) {
	// The XXH64 reference value of the empty input, seed 0.
	if h := xxhash.Sum64String(""); h != 0xef46db3751d8e999 {
		t.Fatalf("xxHash64(\"\") = %x", h)
	}
	req := Request{Path: "/p?user=u1&x=2&e=%41+b&user=u2", ClientIP: "10.1.2.3", Headers: map[string][]string{
		"x-user": {"bob", "alice"}, "cookie": {"a=1; sid=s42"}}}
	hdr := xxhash64Seed("bob", xxhash64Seed("alice", 0)) // sorted, then chained
	ip, q, ck := xxhash.Sum64String("10.1.2.3"), xxhash.Sum64String("u1"), xxhash.Sum64String("s42")
	cases := []struct {
		name string
		keys []ir.HashKey
		want uint64
		ok   bool
	}{
		{"header, values sorted and chained", []ir.HashKey{{Header: "X-User"}}, hdr, true},
		{"source IP then query", []ir.HashKey{{SourceIP: true}, {QueryParameter: "user"}}, bits.RotateLeft64(ip, 1) ^ q, true},
		{"terminal stops", []ir.HashKey{{Cookie: &ir.CookieKey{Name: "sid"}, Terminal: true}, {SourceIP: true}}, ck, true},
		{"missing inputs are skipped", []ir.HashKey{{Header: "x-none"}, {Cookie: &ir.CookieKey{Name: "sid"}}}, ck, true},
		{"nothing present", []ir.HashKey{{Header: "x-none"}}, 0, false},
		{"query values are not decoded", []ir.HashKey{{QueryParameter: "e"}}, xxhash.Sum64String("%41+b"), true},
	}
	for _, tc := range cases {
		h, ok, _ := RequestHash(hashOf(tc.keys), req)
		if h != tc.want || ok != tc.ok {
			t.Errorf("%s: %x %v, want %x %v", tc.name, h, ok, tc.want, tc.ok)
		}
	}
}

func TestMatchRoute(t *testing.T) {
	r := &ir.Route{PathType: ir.PathPrefix, Path: "/api", Headers: []ir.HeaderMatch{
		{Name: "x-env", Type: ir.HeaderExact, Value: "prod"}, {Name: "x-debug", Type: ir.HeaderPresent, Invert: true}}}
	cases := []struct {
		path    string
		headers map[string][]string
		want    bool
	}{
		{"/api/x?q=1", map[string][]string{"x-env": {"prod"}}, true},
		{"/ap", map[string][]string{"x-env": {"prod"}}, false},
		{"/api", map[string][]string{"x-env": {"dev"}}, false},
		{"/api", map[string][]string{"x-env": {"prod"}, "x-debug": {"1"}}, false},
	}
	for _, tc := range cases {
		if got, why := matchRoute(built(r).GetMatch(), Request{Path: tc.path, Headers: tc.headers}); got != tc.want {
			t.Errorf("%s %v: %v (%v)", tc.path, tc.headers, got, why)
		}
	}
	inv := &ir.Route{PathType: ir.PathPrefix, Path: "/", Headers: []ir.HeaderMatch{{Name: "x-env", Type: ir.HeaderExact, Value: "prod", Invert: true}}}
	if ok, _ := matchRoute(built(inv).GetMatch(), Request{Path: "/"}); ok {
		t.Error("an inverted exact match passed on an absent header; Envoy fails it")
	}
}

func TestMatchRouteSegmentsRegexMethodQuery(t *testing.T) {
	for _, tc := range []struct {
		route *ir.Route
		req   Request
		want  bool
	}{
		{&ir.Route{PathType: ir.PathSegmentPrefix, Path: "/api/"}, Request{Path: "/api"}, true},
		{&ir.Route{PathType: ir.PathSegmentPrefix, Path: "/api"}, Request{Path: "/api/v1?x=1"}, true},
		{&ir.Route{PathType: ir.PathSegmentPrefix, Path: "/api"}, Request{Path: "/apix"}, false},
		{&ir.Route{PathType: ir.PathRegex, Path: "/items/[0-9]+"}, Request{Path: "/items/42"}, true},
		{&ir.Route{PathType: ir.PathRegex, Path: "/items/[0-9]+"}, Request{Path: "/items/42/x"}, false},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", Method: "POST"}, Request{Path: "/"}, false},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", Method: "POST"}, Request{Path: "/", Headers: map[string][]string{":method": {"POST"}}}, true},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", QueryParams: []ir.QueryParamMatch{{Name: "v", Type: ir.HeaderExact, Value: "2"}}}, Request{Path: "/?a=1&v=2"}, true},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", QueryParams: []ir.QueryParamMatch{{Name: "v", Type: ir.HeaderExact, Value: "2"}}}, Request{Path: "/?v=3"}, false},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", QueryParams: []ir.QueryParamMatch{{Name: "v", Type: ir.HeaderExact, Value: "2"}}}, Request{Path: "/?v=3&v=2"}, false}, // the first value only, as Envoy
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", QueryParams: []ir.QueryParamMatch{{Name: "v", Type: ir.HeaderExact, Value: "2"}}}, Request{Path: "/?v=2&v=3"}, true},
		{&ir.Route{PathType: ir.PathPrefix, Path: "/", QueryParams: []ir.QueryParamMatch{{Name: "v", Type: ir.HeaderRegex, Value: "[0-9]"}}}, Request{Path: "/?v=7"}, true},
	} {
		if got, why := matchRoute(built(tc.route).GetMatch(), tc.req); got != tc.want {
			t.Errorf("%s %s %q %v: %v, want %v (%v)", tc.route.PathType, tc.route.Path, tc.req.Path, tc.req.Headers, got, tc.want, why)
		}
	}
}

func TestDecodeSession(t *testing.T) {
	var pb []byte
	pb = protowire.AppendTag(pb, 1, protowire.BytesType)
	pb = protowire.AppendString(pb, "10.0.0.7:80")
	pb = protowire.AppendTag(pb, 2, protowire.VarintType)
	pb = protowire.AppendVarint(pb, 12345)
	for _, v := range []string{
		EncodeSession("10.0.0.7:80"),
		base64.StdEncoding.EncodeToString([]byte(`{"address":"10.0.0.7:80","expires":1}`)),
		base64.StdEncoding.EncodeToString(pb),
	} {
		if got, err := DecodeSession(v); err != nil || got != "10.0.0.7:80" {
			t.Errorf("%s: %q %v", v, got, err)
		}
	}
	if _, err := DecodeSession("%%%"); err == nil {
		t.Error("garbage decoded")
	}
}
