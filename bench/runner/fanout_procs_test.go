package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// The row's clients are split over the processes in contiguous runs of row indexes, each once, the runs'
// lengths differing by one at most; over them all each replica has the clients it has in one process.
func TestSwarmShares(t *testing.T) {
	if got, want := swarmShares(10, 3), [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8, 9}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("swarmShares(10, 3) = %v; want %v", got, want)
	}
	for _, c := range []struct{ n, k, replicas int }{{10, 3, 3}, {400, 2, 2}, {50000, 3, 3}, {50000, 4, 3}, {7, 7, 2}, {1001, 6, 5}} {
		shares := swarmShares(c.n, c.k)
		if len(shares) != c.k {
			t.Fatalf("%+v: %d shares; want %d", c, len(shares), c.k)
		}
		var all []int
		onReplica := make([]int, c.replicas)
		for _, rows := range shares {
			if len(rows) < c.n/c.k || len(rows) > c.n/c.k+1 {
				t.Errorf("%+v: a share of %d clients; want %d or %d", c, len(rows), c.n/c.k, c.n/c.k+1)
			}
			for _, i := range rows {
				onReplica[i%c.replicas]++
			}
			all = append(all, rows...)
		}
		if len(all) != c.n {
			t.Fatalf("%+v: %d clients in the shares; want %d", c, len(all), c.n)
		}
		for i, row := range all {
			if row != i {
				t.Fatalf("%+v: the shares' clients in order have %d at %d; want each row index once, in order", c, row, i)
			}
		}
		for r, got := range onReplica {
			if want := c.n/c.replicas + b2i(r < c.n%c.replicas); got != want {
				t.Errorf("%+v: replica %d has %d clients over the shares; want %d, as in one process", c, r, got, want)
			}
		}
	}
}

// Every request and answer is one line and reads back as written.
func TestSwarmProtocolLines(t *testing.T) {
	msgs := []any{
		&swarmRequest{Op: "start", Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Rows: []int{3, 4, 5}, SOTW: true},
		&swarmRequest{Op: "ready", Limit: 5 * time.Minute},
		&swarmRequest{Op: "change"},
		&swarmReply{Op: "ready", Ready: 3, LastReady: 1700000000123456789, LostAfter: 0, Lost: 2},
		&swarmReply{Op: "change", ChangeAt: 1700000001000000000},
		&swarmReply{Op: "wait", LostAfter: 1, Lost: 4, Got: []swarmClient{
			{Row: 3, First: 1700000001000500000, Last: 1700000001002000000, Count: 2, ByType: [4]int32{1, 1, 0, 0}},
			{Row: 5, First: 1700000001000700000, Last: 1700000001000700000, Count: 1, ByType: [4]int32{1, 0, 0, 0}}}},
		&swarmReply{Op: "stats", Err: "stats before start"},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(msgs) {
		t.Fatalf("%d messages written as %d lines:\n%s", len(msgs), len(lines), buf.String())
	}
	for i, m := range msgs {
		back := reflect.New(reflect.TypeOf(m).Elem()).Interface()
		if err := json.Unmarshal([]byte(lines[i]), back); err != nil {
			t.Fatalf("line %d %s: %v", i, lines[i], err)
		}
		if !reflect.DeepEqual(back, m) {
			t.Errorf("line %d %s reads back as %+v; want %+v", i, lines[i], back, m)
		}
	}
	if !strings.Contains(lines[1], `"limit":300000000000`) {
		t.Errorf("ready request %s: want its limit in ns", lines[1])
	}
}

// The children's reports of a change make the result one process would have: the clients in row order,
// their times in ms after the parent's start of the change, and per replica only its clients.
func TestMergeSwarmResults(t *testing.T) {
	const at = int64(1_700_000_000_000_000_000)
	ms := func(x float64) int64 { return at + int64(x*1e6) }
	parts := [][]swarmClient{
		{{Row: 0, First: ms(1), Last: ms(2.5), Count: 2, ByType: [4]int32{1, 1, 0, 0}},
			{Row: 2, First: ms(3), Last: ms(3), Count: 1, ByType: [4]int32{1, 0, 0, 0}}},
		{{Row: 3, First: ms(0.5), Last: ms(4), Count: 3, ByType: [4]int32{1, 1, 1, 0}},
			{Row: 5, First: ms(2), Last: ms(6), Count: 1, ByType: [4]int32{0, 0, 0, 1}}},
		nil, // a child none of whose clients had the change
	}
	all := mergeSwarmResults([]([]swarmClient){parts[1], parts[0], parts[2]}, at, 2, -1)
	if want := []float64{2.5, 3, 4, 6}; !reflect.DeepEqual(all.samples, want) {
		t.Errorf("samples %v; want %v (row order)", all.samples, want)
	}
	if want := []float64{1, 3, 0.5, 2}; !reflect.DeepEqual(all.firsts, want) {
		t.Errorf("firsts %v; want %v", all.firsts, want)
	}
	if want := map[int32]int{1: 2, 2: 1, 3: 1}; !reflect.DeepEqual(all.counts, want) {
		t.Errorf("counts %v; want %v", all.counts, want)
	}
	if want := [4]int64{3, 2, 1, 1}; all.perType != want {
		t.Errorf("responses by type %v; want %v", all.perType, want)
	}
	// Replica 0 has the even rows, replica 1 the odd ones.
	if r0 := mergeSwarmResults(parts, at, 2, 0); !reflect.DeepEqual(r0.samples, []float64{2.5, 3}) || r0.perType != [4]int64{2, 1, 0, 0} {
		t.Errorf("replica 0: samples %v, by type %v; want [2.5 3], [2 1 0 0]", r0.samples, r0.perType)
	}
	if r1 := mergeSwarmResults(parts, at, 2, 1); !reflect.DeepEqual(r1.samples, []float64{4, 6}) || !reflect.DeepEqual(r1.firsts, []float64{0.5, 2}) {
		t.Errorf("replica 1: samples %v, firsts %v; want [4 6], [0.5 2]", r1.samples, r1.firsts)
	}
	if none := mergeSwarmResults(nil, at, 2, -1); len(none.samples) != 0 || none.counts == nil {
		t.Errorf("no reports: %+v; want no samples and an empty counts map", none)
	}
}

// A child serves its share of the row's clients against two servers: each client on the server of its
// row index, ready, a change timed from its start, the answers in order, and it stops at the end of its
// input.
func TestServeSwarmChild(t *testing.T) {
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	rows := []int{3, 4, 5}
	for _, i := range rows {
		if err := cache.SetSnapshot(context.Background(), fmt.Sprintf("sim-%d", i), snapshot(t, "v1", time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	srvs := []*nodeServer{startNodeServer(t, cache), startNodeServer(t, cache)}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	gone := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- serveSwarmChild(context.Background(), inR, outW, func() { close(gone) })
		outW.Close()
	}()
	enc, dec := json.NewEncoder(inW), json.NewDecoder(outR)
	ask := func(r swarmRequest) swarmReply {
		t.Helper()
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		var rep swarmReply
		if err := dec.Decode(&rep); err != nil {
			t.Fatal(err)
		}
		if rep.Op != r.Op || rep.Err != "" {
			t.Fatalf("%s: answered %+v", r.Op, rep)
		}
		return rep
	}
	if err := enc.Encode(swarmRequest{Op: "wait"}); err != nil {
		t.Fatal(err)
	}
	var early swarmReply
	if err := dec.Decode(&early); err != nil || early.Err == "" {
		t.Fatalf("wait before start: %+v, %v; want an error", early, err)
	}
	ask(swarmRequest{Op: "start", Addrs: []string{srvs[0].addr, srvs[1].addr}, Rows: rows})
	started := time.Now()
	ready := ask(swarmRequest{Op: "ready", Limit: 20 * time.Second})
	if ready.Ready != len(rows) || ready.LastReady < started.Add(-time.Second).UnixNano() || ready.LastReady > time.Now().UnixNano() {
		t.Fatalf("ready: %+v; want %d ready, the last between the start and now", ready, len(rows))
	}
	// Client 4 is on server 0, clients 3 and 5 on server 1.
	for s, want := range [][]string{{"sim-4"}, {"sim-3", "sim-5"}} {
		if nodes := srvs[s].seen(); !reflect.DeepEqual(nodes, want) {
			t.Errorf("server %d has clients %v; want %v", s, nodes, want)
		}
	}
	change := ask(swarmRequest{Op: "change"})
	at := time.Now().UnixNano()
	if change.ChangeAt == 0 || change.ChangeAt > at {
		t.Fatalf("change started at %d; want before %d", change.ChangeAt, at)
	}
	for _, i := range rows {
		if err := cache.SetSnapshot(context.Background(), fmt.Sprintf("sim-%d", i), snapshot(t, "v2", 2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got := ask(swarmRequest{Op: "wait"}).Got
	if len(got) != len(rows) {
		t.Fatalf("wait: %+v; want every client", got)
	}
	for k, c := range got {
		if c.Row != rows[k] || c.Count < 1 || c.ByType[0] < 1 || c.First < at || c.Last < c.First || c.Last > time.Now().UnixNano() {
			t.Errorf("client %d: %+v; want row %d, a cluster response, first and last after %d", k, c, rows[k], at)
		}
	}
	res := mergeSwarmResults([][]swarmClient{got}, at, 2, 1)
	if len(res.samples) != 2 || res.samples[0] < 0 {
		t.Errorf("replica 1's result %+v; want clients 3 and 5, after the change", res)
	}
	if st := ask(swarmRequest{Op: "stats"}); st.Lost != 0 || st.LostAfter != 0 {
		t.Errorf("stats %+v; want no connection lost", st)
	}
	inW.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the end of its input was not noticed")
	}
	if err := <-served; err != nil {
		t.Fatalf("served: %v", err)
	}
}

// nodeServer is go-control-plane's ADS server on a loopback port, recording the node IDs of its delta
// streams as their requests come (the server fills in the node of a stream's later requests itself, so
// that the requests cannot be read afterwards).
type nodeServer struct {
	addr  string
	mu    sync.Mutex
	nodes []string
}

func startNodeServer(t *testing.T, cache cachev3.SnapshotCache) *nodeServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &nodeServer{addr: lis.Addr().String()}
	cb := serverv3.CallbackFuncs{StreamDeltaRequestFunc: func(_ int64, r *discoverygrpc.DeltaDiscoveryRequest) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if id := r.GetNode().GetId(); id != "" && !slices.Contains(s.nodes, id) {
			s.nodes = append(s.nodes, id)
		}
		return nil
	}}
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(context.Background(), cache, cb))
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return s
}

// seen is the node IDs of the server's streams so far, sorted.
func (s *nodeServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.nodes))
}
