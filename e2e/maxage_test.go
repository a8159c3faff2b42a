package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// streamSample is one reading of a replica's ACK tracker for one Envoy.
type streamSample struct {
	replica   int
	connected time.Time
	version   string // the version it last acknowledged
}

// TestXDSMaxConnectionAgeRebalancesAndLosesNoChange: two replicas on etcd close their xDS connections at a
// 2 s maximum age; a delta and a state-of-the-world Envoy, each listing both replicas, reconnect again and
// again while policies are pushed on both replicas one after another. Every change reaches both Envoys, the
// version each Envoy acknowledges (the replicas' ACK trackers) and the listeners it runs (its config dump)
// only go forward, each replica counts the connections it closed for age, and lbctl status counts the
// clients of each replica. Then one replica is killed, its Envoys move to the other, and once it is back
// it feeds an Envoy again within a few ages (without a maximum age none would leave). No request of a
// steady client fails throughout.
func TestXDSMaxConnectionAgeRebalancesAndLosesNoChange(t *testing.T) {
	t.Parallel()
	const maxAge = 2 * time.Second
	ec := etcdtest.Start(t, 1)
	key := etcdKeyFile(t, 0x37)
	ids := []string{"r0", "r1"}
	var replicas []*Lbplane
	for _, id := range ids {
		replicas = append(replicas, startLbplane(t, append(ec.Flags(), "--store", "etcd", "--etcd-secret-key-file", key,
			"--replica-id", id, "--xds-max-connection-age", maxAge.String())...))
	}
	bs := startBackends(t, "steady", "added")
	mainPort := reservePort(t)
	push(t, replicas[0], policy(t, haPolicy, map[string]any{"Name": "age-main", "Port": mainPort, "Backend": bs[0].Port}))
	xds := replicas[0].XDSAddr + "," + replicas[1].XDSAddr
	var envoys []*Envoy
	for _, e := range []struct {
		node  string
		delta bool
	}{{"age-delta", true}, {"age-sotw", false}} {
		envoys = append(envoys, startEnvoyFrom(t, envoybootstrap.Params{NodeID: e.node, Group: "default", XDS: xds, Delta: e.delta,
			TLS: envoyTLS(t, replicas[0], e.node, "default")}, "config:info,upstream:info", "--drain-time-s", "1"))
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", mainPort)
	waitServing(t, url, "steady")
	load := startLoad(url, 40, 2, 3*time.Minute)
	stopLoad := sync.OnceFunc(load.Stop)
	defer stopLoad()
	load.WaitServed(t, 20)

	// The replicas' ACK trackers, read every 100 ms until the pushes are done (bounded by count).
	var mu sync.Mutex
	samples := map[string][]streamSample{}
	stop := make(chan struct{})
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for range 3000 {
			for i, l := range replicas {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				ps, err := l.Client.Proxies(ctx)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				for _, p := range ps {
					samples[p.NodeID] = append(samples[p.NodeID], streamSample{replica: i, connected: p.ConnectedAt, version: p.Version})
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	streamsSeen := func(node string) int {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, s := range samples[node] {
			seen[fmt.Sprint(s.replica, s.connected.UnixNano())] = true
		}
		return len(seen)
	}

	// Pushes on each replica in turn, for at least four ages; order[v] is the push that made the group's
	// version v (every replica builds the same content-hash versions).
	order := map[string]int{}
	record := func(k int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, l := range replicas {
			if v, err := l.Client.Version(ctx); err == nil && v.Store != nil {
				if ver := v.Store.Versions["default"]; ver != "" {
					if _, ok := order[ver]; !ok {
						order[ver] = k
					}
				}
			}
		}
	}
	record(0)
	listenersSeen := map[int]bool{}
	var ports []int
	started := time.Now()
	// Until both Envoys were seen on four streams: a stream past its age waits for its client to answer what
	// it was sent, which takes longer on a loaded machine, so the pushes go on for up to a minute (bounded
	// in count too), not a fixed number of them.
	more := func(k int) bool {
		if k <= 8 || time.Since(started) < 4*maxAge {
			return true
		}
		return k <= 150 && time.Since(started) < time.Minute && (streamsSeen("age-delta") < 4 || streamsSeen("age-sotw") < 4)
	}
	for k := 1; more(k); k++ {
		p := reservePort(t)
		ports = append(ports, p)
		push(t, replicas[k%2], policy(t, haPolicy, map[string]any{"Name": fmt.Sprintf("age-%d", k), "Port": p, "Backend": bs[1].Port}))
		record(k)
		// What each Envoy runs only goes forward: no listener it had is taken back by a reconnection.
		dumps := make([]string, len(envoys))
		for i, e := range envoys {
			dumps[i] = e.ConfigDump(t)
			for q := range listenersSeen {
				if !strings.Contains(dumps[i], fmt.Sprintf(`"port_value": %d`, q)) {
					t.Errorf("after push %d, %s no longer runs the listener on port %d it ran before", k, e.NodeID, q)
				}
			}
		}
		for _, q := range ports {
			all := true
			for _, d := range dumps {
				all = all && strings.Contains(d, fmt.Sprintf(`"port_value": %d`, q))
			}
			if all {
				listenersSeen[q] = true
			}
		}
	}
	// Every change reaches both Envoys.
	eventually(t, 30*time.Second, "both Envoys run every pushed policy", func() error {
		for _, e := range envoys {
			dump := e.ConfigDump(t)
			for _, q := range ports {
				if !strings.Contains(dump, fmt.Sprintf(`"port_value": %d`, q)) {
					return fmt.Errorf("%s lacks the listener on port %d", e.NodeID, q)
				}
			}
		}
		return nil
	})
	for _, q := range ports {
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/", q), "added")
	}
	close(stop)
	<-observed

	for _, e := range envoys {
		t.Logf("%s: %d streams seen over %d pushes", e.NodeID, streamsSeen(e.NodeID), len(ports))
		if n := streamsSeen(e.NodeID); n < 4 {
			t.Errorf("%s was seen on %d streams; want at least 4 (it reconnects every %s)", e.NodeID, n, maxAge)
		}
		// The versions it acknowledged, in the order the pushes made them, never go back (versions of
		// make-before-break steps between two pushes are not any push's, and are left out).
		last, lastVer := -1, ""
		mu.Lock()
		for _, s := range samples[e.NodeID] {
			k, ok := order[s.version]
			if !ok {
				continue
			}
			if k < last {
				t.Errorf("%s acknowledged %s (push %d) after %s (push %d): it went back", e.NodeID, s.version, k, lastVer, last)
			}
			last, lastVer = k, s.version
		}
		mu.Unlock()
		if last < 1 {
			t.Errorf("%s: no acknowledged version of a push was seen", e.NodeID)
		}
	}
	closed := 0.0
	for i, l := range replicas {
		n := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort))[`lbplane_xds_connections_closed_total{reason=max_age}`]
		t.Logf("%s closed %v connections for age", ids[i], n)
		closed += n
	}
	if closed < 6 {
		t.Errorf("the replicas closed %v connections for age; want at least 6 (two Envoys, four ages)", closed)
	}
	// lbctl status counts each replica's clients, from the reports the replicas publish every 2 s: once a
	// reading falls between two reconnections, the counts add up to both Envoys.
	attempts := 0
	eventually(t, 30*time.Second, "lbctl status counts both Envoys over the replicas", func() error {
		attempts++
		_, stderr, err := lbctl(t, replicas[0], "", "status")
		if err != nil {
			return err
		}
		_, line, ok := strings.Cut(stderr, "clients per replica:")
		line, _, _ = strings.Cut(line, "\n")
		counts := map[string]int{}
		for _, part := range strings.Split(line, ",") {
			var id string
			var n int
			if _, err := fmt.Sscanf(strings.TrimSpace(part), "%s %d", &id, &n); err == nil {
				counts[id] = n
			}
		}
		if !ok || len(counts) != len(ids) || counts["r0"]+counts["r1"] != len(envoys) || !strings.Contains(line, "r0 ") ||
			!strings.Contains(line, "(this one)") {
			return fmt.Errorf("clients per replica %v; lbctl status:\n%s", counts, stderr)
		}
		t.Logf("lbctl status (reading %d):\n%s", attempts, stderr)
		return nil
	})

	// A replica that comes back gets Envoys again within a few ages.
	replicas[1].Kill()
	eventually(t, 60*time.Second, "both Envoys on r0 while r1 is down", func() error {
		if n := len(connectedNodes(t, replicas[0])); n != len(envoys) {
			return fmt.Errorf("%d Envoys on r0", n)
		}
		return nil
	})
	replicas[1].Restart(t)
	back := time.Now()
	eventually(t, 15*maxAge, "the restarted replica feeds an Envoy again", func() error {
		if n := len(connectedNodes(t, replicas[1])); n == 0 {
			return fmt.Errorf("no Envoy on r1 %s after its restart", time.Since(back).Round(time.Second))
		}
		return nil
	})
	t.Logf("r1 fed an Envoy again %s after its restart", time.Since(back).Round(100*time.Millisecond))
	waitServing(t, url, "steady")
	stopLoad()
	load.RequireNoFailures(t, 100)
}
