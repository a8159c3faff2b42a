package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

const haStormPolicy = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP, hostnames: [{{.Name}}.example.com]}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

const haPolicy = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

// haFleet is three lbplane replicas on one etcd cluster and the Envoys they feed.
type haFleet struct {
	t        *testing.T
	etcd     *etcdtest.Cluster
	replicas []*Lbplane
	ids      []string
	live     []bool
	envoys   []*Envoy
	policies map[string]bool // the names pushed (and not deleted): what every replica must list
}

func (f *haFleet) status(i int) (*apiwire.StoreStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := f.replicas[i].Client.Version(ctx)
	if err != nil {
		return nil, err
	}
	if v.Store == nil {
		return nil, fmt.Errorf("replica %s reports no shared store", f.ids[i])
	}
	return v.Store, nil
}

// leader waits until exactly one live replica says it leads, and returns it.
func (f *haFleet) leader() int {
	f.t.Helper()
	var out int
	eventually(f.t, 30*time.Second, "one leader among the live replicas", func() error {
		var leaders []int
		for i := range f.replicas {
			if !f.live[i] {
				continue
			}
			st, err := f.status(i)
			if err != nil {
				return err
			}
			if st.Role == "leader" {
				leaders = append(leaders, i)
			}
		}
		if len(leaders) != 1 {
			return fmt.Errorf("leaders: %v", leaders)
		}
		out = leaders[0]
		return nil
	})
	return out
}

// placement is the replica each Envoy is connected to (by node id), once every Envoy is connected to a
// live replica and runs that replica's config.
func (f *haFleet) placement() map[string]int {
	f.t.Helper()
	var out map[string]int
	// An Envoy whose replica was partitioned away notices by HTTP/2 keepalive (a PING 4 s after the last
	// answer, 4 s timeout: the bootstrap's) before it reconnects to another: about 10 s.
	eventually(f.t, 90*time.Second, "every Envoy connected to a live replica and SYNCED", func() error {
		out = map[string]int{}
		for i, l := range f.replicas {
			if !f.live[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ps, err := l.Client.Proxies(ctx)
			cancel()
			if err != nil {
				return err
			}
			for _, p := range ps {
				if p.State != xdsserver.Synced {
					return fmt.Errorf("%s on %s is %s %s", p.NodeID, f.ids[i], p.State, p.Message)
				}
				out[p.NodeID] = i
			}
		}
		if len(out) != len(f.envoys) {
			return fmt.Errorf("connected: %v", out)
		}
		return nil
	})
	return out
}

// lists returns what each live replica lists, by replica index; the others are left out.
func (f *haFleet) lists() (map[int][]*v1alpha1.LoadBalancerPolicy, error) {
	out := map[int][]*v1alpha1.LoadBalancerPolicy{}
	for i, l := range f.replicas {
		if !f.live[i] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ps, err := l.Client.List(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing on %s: %w", f.ids[i], err)
		}
		out[i] = ps
	}
	return out, nil
}

// converged waits until every live replica lists exactly the policies pushed and serves the same config
// versions, and every Envoy runs them; it returns the versions.
func (f *haFleet) converged(what string) map[string]string {
	f.t.Helper()
	var versions map[string]string
	eventually(f.t, 60*time.Second, what+": every replica holds the same policies and versions", func() error {
		versions = nil
		lists, err := f.lists()
		if err != nil {
			return err
		}
		for i, ps := range lists {
			var names []string
			for _, p := range ps {
				names = append(names, p.Name)
			}
			want := slices.Sorted(maps.Keys(f.policies))
			slices.Sort(names)
			if !slices.Equal(names, want) {
				return fmt.Errorf("%s lists %v, want %v (lost or duplicated policies)", f.ids[i], names, want)
			}
			st, err := f.status(i)
			if err != nil {
				return err
			}
			if st.Stale {
				return fmt.Errorf("%s is stale", f.ids[i])
			}
			if versions == nil {
				versions = st.Versions
			} else if fmt.Sprint(versions) != fmt.Sprint(st.Versions) {
				return fmt.Errorf("%s serves versions %v, another replica %v", f.ids[i], st.Versions, versions)
			}
		}
		return nil
	})
	f.placement()
	return versions
}

// statusEverywhere waits until every live replica shows each policy's status counting the whole fleet's
// Envoys, every one running it, with the same conditions: lbctl get says the same on every replica.
func (f *haFleet) statusEverywhere(what string) {
	f.t.Helper()
	n := int32(len(f.envoys))
	eventually(f.t, 30*time.Second, what+": every replica's status counts every Envoy, all running the config", func() error {
		var first []string
		lists, err := f.lists()
		if err != nil {
			return err
		}
		for i, ps := range lists {
			var seen []string
			for _, p := range ps {
				prog := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
				if p.Status.Proxies.Connected != n || p.Status.Proxies.Synced != n || prog == nil || prog.Status != metav1.ConditionTrue {
					return fmt.Errorf("on %s, %s: proxies %+v, Programmed %+v; want all %d Envoys running it", f.ids[i], p.Name, p.Status.Proxies, prog, n)
				}
				for _, c := range p.Status.Conditions {
					seen = append(seen, fmt.Sprintf("%s %s %s %s %q", p.Name, c.Type, c.Status, c.Reason, c.Message))
				}
			}
			if first == nil {
				first = seen
			} else if !slices.Equal(first, seen) {
				return fmt.Errorf("%s's conditions differ from another replica's:\n%v\n%v", f.ids[i], seen, first)
			}
		}
		return nil
	})
}

// dynamicConfig is an Envoy's config from lbplane, with each resource's version and, withTimes, its last
// update time and the type's last response version: equal before and after a move between replicas means
// the move sent it nothing new. The bootstrap's
// static parts and the SDS secrets (this Envoy's own client certificate) are left out.
func dynamicConfig(t *testing.T, e *Envoy, withTimes bool) string {
	t.Helper()
	var keep []any
	for _, c := range configDumpOf(t, e, "BootstrapConfigDump", "SecretsConfigDump") {
		out := map[string]any{}
		for k, v := range c {
			if strings.HasPrefix(k, "static_") {
				continue
			}
			// Envoy lists the resources of a type in the order they arrived, which differs between Envoys
			// fed by different replicas: the lists are compared as sets.
			if list, ok := v.([]any); ok && strings.HasPrefix(k, "dynamic_") {
				v = sortedByJSON(t, list)
			}
			out[k] = v
		}
		if withTimes {
			keep = append(keep, out)
		} else {
			// Across Envoys, what counts is each resource and its version. The type's own version_info is the
			// system version of the last response of that type the Envoy took, which is history: replicas
			// that took a storm of pushes in different batches passed through different intermediate
			// versions before the same last one, and a type the last change did not touch keeps its older one.
			delete(out, "version_info")
			keep = append(keep, dropKey(out, "last_updated"))
		}
	}
	b, err := json.MarshalIndent(keep, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameConfigEverywhere checks that every Envoy runs the same config from lbplane, whichever replica feeds it.
func (f *haFleet) sameConfigEverywhere(what string) {
	f.t.Helper()
	eventually(f.t, 30*time.Second, what+": every Envoy runs the same config, versions included", func() error {
		first := dynamicConfig(f.t, f.envoys[0], false)
		for _, e := range f.envoys[1:] {
			if got := dynamicConfig(f.t, e, false); got != first {
				return fmt.Errorf("%s's config differs from %s's:\n%s", e.NodeID, f.envoys[0].NodeID, firstDiff(first, got))
			}
		}
		return nil
	})
}

func (f *haFleet) push(i int, doc []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.replicas[i].Client.Apply(ctx, doc, false)
	if err == nil && res.LaggingTotal > 0 {
		f.t.Logf("push on %s: lagging %v", f.ids[i], res.Lagging)
	}
	return err
}

func (f *haFleet) kill(i int) {
	f.replicas[i].Kill()
	f.live[i] = false
}

func (f *haFleet) restart(i int) {
	f.t.Helper()
	f.replicas[i].Restart(f.t)
	f.live[i] = true
}

func readyz(t *testing.T, l *Lbplane) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + l.ports.Metrics + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// faultReport is what one fault cost: the requests of the steady client during it and how many failed, the
// policies every replica lists after it against those pushed (lost: pushed and not listed; duplicated:
// listed twice, or listed and never pushed), and how long a change pushed in it took to reach every replica
// and every Envoy.
type faultReport struct {
	fault            string
	requests, failed int64
	policies         int
	lost, duplicated int
	reached          time.Duration
	change           string // what reached measures, from when
}

// faults records a report per fault of the fleet under the steady client load.
type faults struct {
	f        *haFleet
	load     *Load
	ok, fail int64 // the load's counters when the fault began
	reports  []faultReport
}

func (fs *faults) begin() { fs.ok, fs.fail = fs.load.OK.Load(), fs.load.Failed.Load() }

// end reports the fault begun last, once the fleet has converged on it (converged checks that every live
// replica lists exactly what was pushed: the counts are what they list).
func (fs *faults) end(fault string, reached time.Duration, change string) {
	f := fs.f
	f.t.Helper()
	r := faultReport{fault: fault, reached: reached, change: change, policies: len(f.policies)}
	ok, fail := fs.load.OK.Load(), fs.load.Failed.Load()
	r.requests, r.failed = ok-fs.ok+fail-fs.fail, fail-fs.fail
	lists, err := f.lists()
	if err != nil {
		f.t.Fatalf("%s: %v", fault, err)
	}
	for _, ps := range lists {
		seen := map[string]int{}
		for _, p := range ps {
			seen[p.Name]++
		}
		lost, dup := 0, 0
		for name := range f.policies {
			if seen[name] == 0 {
				lost++
			}
		}
		for name, n := range seen {
			if n > 1 || !f.policies[name] {
				dup += max(n-1, 1)
			}
		}
		r.lost, r.duplicated = max(r.lost, lost), max(r.duplicated, dup)
	}
	if r.failed > 0 || r.lost > 0 || r.duplicated > 0 {
		f.t.Errorf("%s: %d of %d requests failed, %d policies lost, %d duplicated (target 0 each)", fault, r.failed, r.requests, r.lost, r.duplicated)
	}
	f.t.Logf("%s: %d requests, %d failed; %d policies on every replica, %d lost, %d duplicated; %s reached every replica and Envoy in %s",
		fault, r.requests, r.failed, r.policies, r.lost, r.duplicated, change, reached.Round(time.Millisecond))
	fs.reports = append(fs.reports, r)
	fs.begin()
}

// table logs every fault's report, as docs/ha.md shows it.
func (fs *faults) table() {
	var b strings.Builder
	b.WriteString("| fault | requests | failed | policies | lost | duplicated | change reached every Envoy |\n|---|---|---|---|---|---|---|\n")
	for _, r := range fs.reports {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s (%s) |\n", r.fault, r.requests, r.failed, r.policies, r.lost, r.duplicated, r.reached.Round(time.Millisecond), r.change)
	}
	fs.f.t.Logf("faults under the steady client:\n%s", b.String())
}

// TestEtcdHAReplicas: three hosts (network namespaces on a test switch), each with an etcd member and an
// lbplane replica, feed three real Envoys here under a steady client. A push on any replica reaches every
// replica and every Envoy with the same versions; the leader replica SIGKILLed, a replica cut off from etcd,
// a push storm spread over the replicas, and all replicas restarted each cost no request, lose or duplicate
// no policy, and an Envoy that moves between replicas is sent nothing new. Each fault reports its requests,
// failures, policies and the time a change took to reach every Envoy.
func TestEtcdHAReplicas(t *testing.T) {
	t.Parallel()
	lan := newHALAN(t, 3)
	var places []etcdtest.Place
	for i, h := range lan.hosts {
		places = append(places, etcdtest.Place{Netns: h, IP: lan.hostIP(i)})
	}
	ec := etcdtest.StartIn(t, places, "--max-txn-ops", "10000")
	keyFile := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x5a}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eps := ec.Endpoints()
	f := &haFleet{t: t, etcd: ec, ids: []string{"r0", "r1", "r2"}, live: []bool{true, true, true}, policies: map[string]bool{}}
	for i, id := range f.ids {
		endpoints := strings.Join(eps, ",")
		if i == 2 {
			// r2 reaches etcd through member m2 only: stopping m2 cuts it off while the cluster keeps its majority.
			endpoints = eps[2]
		}
		f.replicas = append(f.replicas, startReplicaIn(t, lan, i, append(ec.Flags(endpoints), "--store", "etcd",
			"--etcd-secret-key-file", keyFile, "--replica-id", id, "--etcd-prefix", "/ha/", "--xds-server-name", "lbplane.test")...))
	}
	bs := startBackends(t, "b0", "b1", "b2", "b3")
	port := reservePort(t)
	if err := f.push(0, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[0].Port})); err != nil {
		t.Fatal(err)
	}
	f.policies["ha-main"] = true
	var xds []string
	for _, l := range f.replicas {
		xds = append(xds, l.XDSAddr)
	}
	// The certificates come from r0; the CA is shared, so every replica accepts them. Each Envoy lists every
	// replica, starting with a different one (Envoy tries them in order), so that each replica feeds one.
	for i, n := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		order := append(slices.Clone(xds[i:]), xds[:i]...)
		tls := envoyTLS(t, f.replicas[0], n, "default")
		tls.ServerName = "lbplane.test" // the name every replica's certificate carries
		f.envoys = append(f.envoys, startEnvoyFrom(t, envoybootstrap.Params{NodeID: n, Group: "default", XDS: strings.Join(order, ","), Delta: true,
			TLS: tls}, "config:info,upstream:info", "--drain-time-s", "1"))
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "b0")
	f.converged("start")
	f.sameConfigEverywhere("start")
	f.statusEverywhere("start")
	fed := map[int]bool{}
	for _, r := range f.placement() {
		fed[r] = true
	}
	t.Logf("Envoys by replica: %v", f.placement())
	if len(fed) < 2 {
		t.Errorf("every Envoy is on one replica (%v): the same config across replicas is not shown", f.placement())
	}

	load := startLoad(url, 60, 4, 5*time.Minute)
	stopLoad := sync.OnceFunc(load.Stop)
	defer stopLoad()
	load.WaitServed(t, 50)
	fs := &faults{f: f, load: load}
	fs.begin()

	// A push on each replica is seen by every replica and every Envoy.
	for i := range f.replicas {
		name := fmt.Sprintf("ha-on-%s", f.ids[i])
		p := reservePort(t)
		start := time.Now()
		if err := f.push(i, policy(t, haPolicy, map[string]any{"Name": name, "Port": p, "Backend": bs[1].Port})); err != nil {
			t.Fatalf("push on %s: %v", f.ids[i], err)
		}
		f.policies[name] = true
		f.converged("push on " + f.ids[i])
		fs.end("none (a push on "+f.ids[i]+")", time.Since(start), "that push, from when it was sent")
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/", p), "b1")
	}
	f.sameConfigEverywhere("after a push on each replica")
	f.statusEverywhere("after a push on each replica")

	// Status and readiness name the role.
	leader := f.leader()
	if _, stderr, err := lbctl(t, f.replicas[leader], "", "status"); err != nil || !strings.Contains(stderr, "Store: etcd, replica "+f.ids[leader]+", role leader") {
		t.Errorf("lbctl status on the leader: %v\n%s", err, stderr)
	}
	if code, body := readyz(t, f.replicas[leader]); code != http.StatusOK || !strings.Contains(body, "replica "+f.ids[leader]+", role leader") {
		t.Errorf("/readyz on the leader: %d %q", code, body)
	}
	follower := (leader + 1) % len(f.replicas)
	if code, body := readyz(t, f.replicas[follower]); code != http.StatusOK || !strings.Contains(body, "role follower") {
		t.Errorf("/readyz on a follower: %d %q", code, body)
	}

	// SIGKILL the leader while it feeds an Envoy. Leadership goes in order of candidacy, so killing leaders
	// that feed none (each kill under the same load) brings the lead to a replica that feeds one.
	fs.begin()
	for attempt := 0; ; attempt++ {
		leader = f.leader()
		place := f.placement()
		var fed []string
		for n, r := range place {
			if r == leader {
				fed = append(fed, n)
			}
		}
		before := map[string]string{}
		for _, e := range f.envoys {
			before[e.NodeID] = dynamicConfig(t, e, true)
		}
		t.Logf("SIGKILL leader %s, which feeds %v", f.ids[leader], fed)
		f.kill(leader)
		next := f.leader()
		if next == leader {
			t.Fatal("the killed replica still leads")
		}
		after := f.placement()
		for _, e := range f.envoys {
			if got := dynamicConfig(t, e, true); got != before[e.NodeID] {
				t.Errorf("%s moved from %s to %s and was sent config again (churn):\nbefore %s\nafter %s", e.NodeID, f.ids[place[e.NodeID]], f.ids[after[e.NodeID]], before[e.NodeID], got)
			}
		}
		// Pushes keep working on the others.
		name := fmt.Sprintf("ha-after-kill-%d", attempt)
		p := reservePort(t)
		start := time.Now()
		if err := f.push(next, policy(t, haPolicy, map[string]any{"Name": name, "Port": p, "Backend": bs[2].Port})); err != nil {
			t.Fatalf("push on the new leader %s: %v", f.ids[next], err)
		}
		f.policies[name] = true
		f.converged("after killing " + f.ids[leader])
		reached := time.Since(start)
		f.restart(leader)
		f.converged("after restarting " + f.ids[leader])
		if len(fed) > 0 {
			fs.end(fmt.Sprintf("leader %s SIGKILLed (feeding %s), restarted", f.ids[leader], strings.Join(fed, ", ")), reached,
				"a push on the new leader "+f.ids[next]+" while "+f.ids[leader]+" was down")
			break
		}
		if attempt == 2 {
			t.Fatal("no leader fed an Envoy in three rounds")
		}
	}
	f.sameConfigEverywhere("after the leader was killed")

	// Cut r2 off: stop the only etcd member it knows (the other two keep the majority).
	fs.begin()
	ec.StopMember(2)
	eventually(t, 30*time.Second, "r2 says it is stale", func() error {
		st, err := f.status(2)
		if err != nil {
			return err
		}
		if !st.Stale || st.Role != "follower" {
			return fmt.Errorf("r2: %+v", st)
		}
		return nil
	})
	if code, body := readyz(t, f.replicas[2]); code != http.StatusServiceUnavailable || !strings.Contains(body, "stale") {
		t.Errorf("/readyz of the cut-off replica: %d %q", code, body)
	}
	if code, body := readyz(t, f.replicas[0]); code != http.StatusOK {
		t.Errorf("/readyz of a replica that reaches etcd: %d %q", code, body)
	}
	if _, stderr, err := lbctl(t, f.replicas[2], "", "status"); err != nil || !strings.Contains(stderr, "STALE since") {
		t.Errorf("lbctl status on the cut-off replica: %v\n%s", err, stderr)
	}
	stalePort := reservePort(t)
	err := f.push(2, policy(t, haPolicy, map[string]any{"Name": "ha-refused", "Port": stalePort, "Backend": bs[3].Port}))
	if err == nil || !strings.Contains(err.Error(), "takes no writes") {
		t.Errorf("a push on the cut-off replica: %v", err)
	}
	// The others take pushes meanwhile; r2 catches up when it reaches etcd again.
	if err := f.push(1, policy(t, haPolicy, map[string]any{"Name": "ha-while-cut-off", "Port": stalePort, "Backend": bs[3].Port})); err != nil {
		t.Fatalf("push on r1 while r2 is cut off: %v", err)
	}
	f.policies["ha-while-cut-off"] = true
	back := time.Now()
	ec.StartMember(2)
	f.converged("r2 back")
	fs.end("replica r2 cut off from etcd, then back", time.Since(back), "a push on r1 while r2 was cut off, from when r2's member was started again")
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/", stalePort), "b3")
	if code, body := readyz(t, f.replicas[2]); code != http.StatusOK {
		t.Errorf("/readyz of r2 back on etcd: %d %q", code, body)
	}

	// A push storm spread over the replicas: each pushes its own policies at once, all on one port.
	stormPort := reservePort(t)
	const perReplica = 6
	fs.begin()
	stormStart := time.Now()
	errs := make(chan error, len(f.replicas)*perReplica)
	var wg sync.WaitGroup
	for i := range f.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perReplica {
				name := fmt.Sprintf("storm-%s-%d", f.ids[i], n)
				if err := f.push(i, policy(t, haStormPolicy, map[string]any{"Name": name, "Port": stormPort, "Backend": bs[2].Port})); err != nil {
					errs <- fmt.Errorf("%s on %s: %w", name, f.ids[i], err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("push storm: %v", err)
	}
	pushed := time.Now()
	for i := range f.replicas {
		for n := range perReplica {
			f.policies[fmt.Sprintf("storm-%s-%d", f.ids[i], n)] = true
		}
	}
	f.converged("push storm")
	fs.end(fmt.Sprintf("push storm: %d pushes over %d replicas at once, answered in %s", len(f.replicas)*perReplica, len(f.replicas), pushed.Sub(stormStart).Round(time.Millisecond)),
		time.Since(pushed), "the last push, from when it was answered")
	f.sameConfigEverywhere("push storm")
	stormClient := newClient(true)
	for i := range f.replicas {
		for n := range perReplica {
			host := fmt.Sprintf("storm-%s-%d.example.com", f.ids[i], n)
			got, err := requestVia(stormClient, fmt.Sprintf("http://127.0.0.1:%d/", stormPort), map[string]string{"Host": host})
			if err != nil || got != "b2" {
				t.Errorf("%s through an Envoy: %q %v", host, got, err)
			}
		}
	}

	// Every replica restarted at once: the Envoys keep serving, then get nothing new from the restarted replicas.
	fs.begin()
	before := map[string]string{}
	for _, e := range f.envoys {
		before[e.NodeID] = dynamicConfig(t, e, true)
	}
	for i := range f.replicas {
		f.kill(i)
	}
	for i := range f.replicas {
		f.restart(i)
	}
	f.converged("all replicas restarted")
	for _, e := range f.envoys {
		if got := dynamicConfig(t, e, true); got != before[e.NodeID] {
			t.Errorf("%s was sent config again after every replica restarted (churn)", e.NodeID)
		}
	}
	start := time.Now()
	if err := f.push(2, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[1].Port})); err != nil {
		t.Fatalf("push after the restart: %v", err)
	}
	f.converged("a change after the restart")
	fs.end("every replica SIGKILLed and restarted", time.Since(start), "a push on r2 after the restart")
	waitServing(t, url, "b1")
	f.sameConfigEverywhere("end")
	f.statusEverywhere("end")

	stopLoad()
	load.RequireNoFailures(t, 200)
	t.Logf("steady client: %d requests, %d failed", load.OK.Load(), load.Failed.Load())
	fs.table()
}

// firstDiff shows where two texts part, with a few lines around.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			lo, hi := max(0, i-15), min(i+5, len(al), len(bl))
			return fmt.Sprintf("line %d:\n--- one\n%s\n--- other\n%s", i, strings.Join(al[lo:hi], "\n"), strings.Join(bl[lo:hi], "\n"))
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(al), len(bl))
}

// TestEtcdHARevocationHoldsOnEveryReplica: an Envoy's identity revoked through one replica is cut off by the
// replica that feeds it, and no replica takes it back.
func TestEtcdHARevocationHoldsOnEveryReplica(t *testing.T) {
	t.Parallel()
	ec := etcdtest.Start(t, 1)
	keyFile := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x3c}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rs []*Lbplane
	for _, id := range []string{"r0", "r1"} {
		rs = append(rs, startLbplane(t, append(ec.Flags(ec.Endpoints()[0]), "--store", "etcd",
			"--etcd-secret-key-file", keyFile, "--replica-id", id)...))
	}
	bs := startBackends(t, "b0")
	port := reservePort(t)
	push(t, rs[0], policy(t, haPolicy, map[string]any{"Name": "revoked", "Port": port, "Backend": bs[0].Port}))
	// Both Envoys are fed by r1 first (r0 is their second address); their certificates come from r0.
	for _, n := range []string{"stolen", "honest"} {
		startEnvoyFrom(t, envoybootstrap.Params{NodeID: n, Group: "default", XDS: rs[1].XDSAddr + "," + rs[0].XDSAddr,
			Delta: true, TLS: envoyTLS(t, rs[0], n, "default")}, "config:info,upstream:info", "--drain-time-s", "1")
	}
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/", port), "b0")
	eventually(t, 30*time.Second, "both Envoys on r1", func() error {
		if nodes := connectedNodes(t, rs[1]); !slices.Equal(nodes, []string{"honest", "stolen"}) {
			return fmt.Errorf("r1 feeds %v", nodes)
		}
		return nil
	})
	if out := lbctlOK(t, rs[0], "revoke", "--node", "stolen", "--reason", "host lost"); !strings.Contains(out, "node stolen revoked until") {
		t.Errorf("lbctl revoke on r0 said: %q", out)
	}
	eventually(t, 10*time.Second, "r1 cuts the revoked Envoy off", func() error {
		if nodes := connectedNodes(t, rs[1]); !slices.Equal(nodes, []string{"honest"}) {
			return fmt.Errorf("r1 feeds %v", nodes)
		}
		return nil
	})
	// It tries both replicas in turn; neither takes it back.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		for i, l := range rs {
			if slices.Contains(connectedNodes(t, l), "stolen") {
				t.Fatalf("r%d took the revoked Envoy back", i)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if list := lbctlOK(t, rs[1], "revoke", "--list"); !strings.Contains(list, "stolen") || !strings.Contains(list, "host lost") {
		t.Errorf("lbctl revoke --list on r1: %q", list)
	}
}

// sortedByJSON orders a list by each element's JSON (map keys sorted): equal sets give equal lists.
func sortedByJSON(t *testing.T, list []any) []any {
	t.Helper()
	keyed := make([]struct {
		k string
		v any
	}, len(list))
	for i, v := range list {
		b, err := json.Marshal(dropKey(v, "last_updated"))
		if err != nil {
			t.Fatal(err)
		}
		keyed[i].k, keyed[i].v = string(b), v
	}
	slices.SortFunc(keyed, func(a, b struct {
		k string
		v any
	}) int {
		return strings.Compare(a.k, b.k)
	})
	out := make([]any, len(list))
	for i := range keyed {
		out[i] = keyed[i].v
	}
	return out
}
