package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// haLAN is a switch (a bridge in a network namespace of its own) joining network namespaces the test
// creates, each a host with one address in a /24 of 198.18.0.0/15, and this process's namespace, so that
// Envoys here reach every host. Cut takes a host off the switch: a partition.
type haLAN struct {
	t      *testing.T
	sw     string
	subnet string // "198.18.N."
	hosts  []string
	ports  []string // each host's port on the switch (in sw)
}

func (n *haLAN) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %v: %v %s", args, err, out)
	}
}

var haLANs atomic.Int32

func newHALAN(t *testing.T, hosts int) *haLAN {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("this test creates network namespaces: it needs root and iproute2 (apt-get install iproute2)")
	}
	// Up to four switches per test process (TestEtcdHAReplicas, TestEtcdHAPartitions and TestDocsHostsBlocks
	// run side by side), each with its own names and /24; never 198.18.0.0/24, the cluster's pod network.
	id := 1 + os.Getpid()%60*4 + int(haLANs.Add(1)-1)%4
	n := &haLAN{t: t, sw: fmt.Sprintf("lbp-ha%d-sw", id), subnet: fmt.Sprintf("198.18.%d.", id)}
	if out, err := exec.Command("ip", "netns", "add", n.sw).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s (another run of this test holds it, or left it: ip netns del): %v %s", n.sw, err, out)
	}
	root := fmt.Sprintf("lbpha%dr", id)
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", root).Run()
		for _, h := range n.hosts {
			exec.Command("ip", "netns", "del", h).Run()
		}
		exec.Command("ip", "netns", "del", n.sw).Run()
	})
	n.ip("-n", n.sw, "link", "add", "br0", "type", "bridge")
	n.ip("-n", n.sw, "link", "set", "br0", "up")
	// This namespace's port: .100.
	n.ip("link", "add", root, "type", "veth", "peer", "name", "rootp", "netns", n.sw)
	n.ip("-n", n.sw, "link", "set", "rootp", "master", "br0", "up")
	n.ip("addr", "add", n.subnet+"100/24", "dev", root)
	n.ip("link", "set", root, "up")
	for i := range hosts {
		h := fmt.Sprintf("lbp-ha%d-h%d", id, i)
		n.ip("netns", "add", h)
		n.hosts = append(n.hosts, h)
		port := fmt.Sprintf("h%dp", i)
		n.ip("-n", h, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", n.sw)
		n.ip("-n", n.sw, "link", "set", port, "master", "br0", "up")
		n.ip("-n", h, "addr", "add", n.hostIP(i)+"/24", "dev", "eth0")
		n.ip("-n", h, "link", "set", "eth0", "up")
		n.ip("-n", h, "link", "set", "lo", "up")
		n.ports = append(n.ports, port)
	}
	return n
}

func (n *haLAN) hostIP(i int) string { return n.subnet + strconv.Itoa(10+i) }

// cut takes host i off the switch (true) or puts it back (false).
func (n *haLAN) cut(i int, off bool) {
	n.t.Helper()
	state := "up"
	if off {
		state = "down"
	}
	n.ip("-n", n.sw, "link", "set", n.ports[i], state)
}

// startReplicaIn runs lbplane serve in host i's namespace with the given flags and reads the ports it bound;
// a restart runs it there again on the same ports.
func startReplicaIn(t *testing.T, n *haLAN, i int, extra ...string) *Lbplane {
	t.Helper()
	l := &Lbplane{DataDir: t.TempDir(), extraArg: extra, netns: n.hosts[i]}
	addr := n.hostIP(i) + ":0"
	if err := l.start(t, serve.Ports{XDS: addr, API: addr, Metrics: addr}); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEtcdHAPartitions: three hosts (network namespaces), each with an etcd member and an lbplane replica,
// and three Envoys here listing every replica under a steady client. The minority host partitioned: its
// replica goes stale, refuses pushes, its Envoys move to the others within 15 s (HTTP/2 keepalive; the
// Envoys on the other replicas keep their connections), which take pushes; healed, it catches up. Then the majority lost (two hosts cut): every replica left is stale and refuses pushes, the Envoys keep
// their config; healed, pushes work again. No request fails, no policy is lost or duplicated.
func TestEtcdHAPartitions(t *testing.T) {
	t.Parallel()
	lan := newHALAN(t, 3)
	var places []etcdtest.Place
	for i, h := range lan.hosts {
		places = append(places, etcdtest.Place{Netns: h, IP: lan.hostIP(i)})
	}
	ec := etcdtest.StartIn(t, places, "--max-txn-ops", "10000")
	keyFile := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x77}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &haFleet{t: t, etcd: ec, ids: []string{"r0", "r1", "r2"}, live: []bool{true, true, true}, policies: map[string]bool{}}
	for i, id := range f.ids {
		f.replicas = append(f.replicas, startReplicaIn(t, lan, i, append(ec.Flags(), "--store", "etcd",
			"--etcd-secret-key-file", keyFile, "--replica-id", id, "--xds-server-name", "lbplane.test")...))
	}
	bs := startBackends(t, "b0", "b1", "b2")
	port := reservePort(t)
	if err := f.push(0, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[0].Port})); err != nil {
		t.Fatal(err)
	}
	f.policies["ha-main"] = true
	var xds []string
	for _, l := range f.replicas {
		xds = append(xds, l.XDSAddr)
	}
	for i, name := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		order := append(append([]string{}, xds[i:]...), xds[:i]...)
		tls := envoyTLS(t, f.replicas[0], name, "default")
		tls.ServerName = "lbplane.test" // the name every replica's certificate carries
		f.envoys = append(f.envoys, startEnvoyFrom(t, envoybootstrap.Params{NodeID: name, Group: "default", XDS: strings.Join(order, ","), Delta: true,
			TLS: tls}, "config:info,upstream:info", "--drain-time-s", "1"))
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "b0")
	f.converged("start")
	placed := f.placement()
	t.Logf("Envoys by replica: %v", placed)
	load := startLoad(url, 60, 4, 5*time.Minute)
	stopLoad := sync.OnceFunc(load.Stop)
	defer stopLoad()
	load.WaitServed(t, 50)
	fs := &faults{f: f, load: load}
	fs.begin()

	// The minority partitioned: the host of envoy-c's replica (an etcd member and that replica) off the
	// switch; the two other hosts (m, n) are the majority.
	p := placed["envoy-c"]
	m, n := (p+1)%3, (p+2)%3
	var onP []string // the Envoys whose replica goes silent
	cxBefore := map[string]int64{}
	for _, e := range f.envoys {
		if placed[e.NodeID] == p {
			onP = append(onP, e.NodeID)
		}
		cxBefore[e.NodeID] = envoyStat(t, e, "cluster.lbplane_xds.upstream_cx_total")
	}
	lan.cut(p, true)
	f.live[p] = false
	start := time.Now()
	// Each of its Envoys hears nothing (no reset): HTTP/2 keepalive (the bootstrap's PINGs) tells it its
	// replica is gone, and it opens its stream to another address.
	var moved time.Duration
	eventually(t, 90*time.Second, fmt.Sprintf("%v, partitioned away from %s, SYNCED on another replica", onP, f.ids[p]), func() error {
		for _, id := range onP {
			found := false
			for _, i := range []int{m, n} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ps, err := f.replicas[i].Client.Proxies(ctx)
				cancel()
				if err != nil {
					return err
				}
				for _, pr := range ps {
					found = found || pr.NodeID == id && pr.State == xdsserver.Synced
				}
			}
			if !found {
				return fmt.Errorf("%s not yet on %s or %s", id, f.ids[m], f.ids[n])
			}
		}
		moved = time.Since(start)
		return nil
	})
	t.Logf("minority partitioned: %v moved from %s to another replica %s after the partition", onP, f.ids[p], moved.Round(time.Millisecond))
	// The bound the bootstrap's keepalive gives (PING 4 s + 15 % jitter after the last answer, closed 4 s
	// later, then a reconnect), with room for a busy machine.
	if moved > 15*time.Second {
		t.Errorf("an Envoy took %s to leave a silent replica, want at most 15 s", moved.Round(time.Millisecond))
	}
	for _, e := range f.envoys {
		timeouts := envoyStat(t, e, "cluster.lbplane_xds.http2.keepalive_timeout")
		if slices.Contains(onP, e.NodeID) {
			if timeouts == 0 {
				t.Errorf("%s left its silent replica, but not by HTTP/2 keepalive (cluster.lbplane_xds.http2.keepalive_timeout 0)", e.NodeID)
			}
			continue
		}
		// An Envoy on a healthy replica keeps its connection: no keepalive timeout, no new connection.
		if cx := envoyStat(t, e, "cluster.lbplane_xds.upstream_cx_total"); timeouts != 0 || cx != cxBefore[e.NodeID] {
			t.Errorf("%s, on healthy replica %s, reconnected: keepalive timeouts %d, xDS connections %d then %d", e.NodeID, f.ids[placed[e.NodeID]], timeouts, cxBefore[e.NodeID], cx)
		}
	}
	pushedAt := time.Now()
	if err := f.push(m, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[1].Port})); err != nil {
		t.Fatalf("push on the majority side: %v", err)
	}
	f.converged("minority partitioned")
	reached := time.Since(pushedAt)
	waitServing(t, url, "b1")
	t.Logf("minority partitioned: a push on the majority reached every replica left and every Envoy in %s after the partition", time.Since(start).Round(time.Millisecond))
	// The partitioned replica itself, seen from its own namespace, is stale and refuses pushes.
	out, err := exec.Command("ip", "netns", "exec", lan.hosts[p], filepath.Join(binDir, "lbctl"), "--server", f.replicas[p].APIURL, "--token", token, "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "STALE since") {
		t.Errorf("lbctl status on the partitioned replica: %v\n%s", err, out)
	}
	doc := policy(t, haPolicy, map[string]any{"Name": "ha-refused", "Port": reservePort(t), "Backend": bs[2].Port})
	cmd := exec.Command("ip", "netns", "exec", lan.hosts[p], filepath.Join(binDir, "lbctl"), "--server", f.replicas[p].APIURL, "--token", token, "push-config", "-f", "-")
	cmd.Stdin = bytes.NewReader(doc)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "takes no writes") {
		t.Errorf("a push on the partitioned replica: %v\n%s", err, out)
	}
	lan.cut(p, false)
	f.live[p] = true
	f.converged("minority healed")
	fs.end(fmt.Sprintf("minority host (%s and an etcd member) partitioned, then healed", f.ids[p]), reached,
		"a push on the majority while partitioned")

	// The majority lost: hosts m and n off the switch. p's replica is left, alone with one member of three.
	lan.cut(m, true)
	lan.cut(n, true)
	f.live[m], f.live[n] = false, false
	eventually(t, 30*time.Second, f.ids[p]+" says it is stale", func() error {
		st, err := f.status(p)
		if err != nil {
			return err
		}
		if !st.Stale {
			return fmt.Errorf("%s: %+v", f.ids[p], st)
		}
		return nil
	})
	if err := f.push(p, policy(t, haPolicy, map[string]any{"Name": "ha-refused", "Port": reservePort(t), "Backend": bs[2].Port})); err == nil || !strings.Contains(err.Error(), "takes no writes") {
		t.Errorf("a push without an etcd majority: %v", err)
	}
	f.placement() // every Envoy on p's replica, the one they still reach, with its last good config
	if got, err := requestVia(newClient(false), url, nil); err != nil || got != "b1" {
		t.Errorf("through an Envoy while etcd has no majority: %q %v", got, err)
	}
	lan.cut(m, false)
	lan.cut(n, false)
	f.live[m], f.live[n] = true, true
	if err := eventuallyErr(60*time.Second, func() error {
		pushedAt = time.Now()
		return f.push(p, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[2].Port}))
	}); err != nil {
		t.Fatalf("push once the majority is back: %v", err)
	}
	f.converged("majority healed")
	fs.end(fmt.Sprintf("majority hosts (%s, %s and two etcd members) partitioned, then healed", f.ids[m], f.ids[n]), time.Since(pushedAt),
		"the first push taken after the heal")
	waitServing(t, url, "b2")
	f.sameConfigEverywhere("healed")

	stopLoad()
	load.RequireNoFailures(t, 200)
	t.Logf("steady client: %d requests, %d failed", load.OK.Load(), load.Failed.Load())
	fs.table()
}

// eventuallyErr retries f until it succeeds or timeout passes, returning its last error.
func eventuallyErr(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}
