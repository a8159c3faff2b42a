package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/serve"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// TestEtcdHAOneNameSeveralAnswers: lbctl bootstrap --xds-address with one DNS name that resolves to every
// replica. Three replicas on etcd serve xDS on one port of 127.0.0.1, 127.0.0.2 and 127.0.0.3 (a DNS
// answer carries no port), and a DNS server the test runs answers the name with the three addresses. The
// Envoy's xDS cluster holds every answer; when the replica feeding it is SIGKILLed it moves to another,
// keeps serving, and takes the next push from there.
func TestEtcdHAOneNameSeveralAnswers(t *testing.T) {
	t.Parallel()
	ec := etcdtest.Start(t, 1)
	keyFile := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x3c}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &haFleet{t: t, etcd: ec, ids: []string{"r0", "r1", "r2"}, live: []bool{true, true, true}, policies: map[string]bool{}}
	flags := func(id string) []string {
		return append(ec.Flags(), "--store", "etcd", "--etcd-secret-key-file", keyFile,
			"--replica-id", id, "--xds-server-name", "lbplane.test")
	}
	f.replicas = append(f.replicas, startLbplane(t, flags("r0")...))
	_, xdsPort, err := net.SplitHostPort(f.replicas[0].XDSAddr)
	if err != nil {
		t.Fatal(err)
	}
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	for i, id := range f.ids[1:] {
		l := &Lbplane{DataDir: t.TempDir(), extraArg: flags(id)}
		if err := l.start(t, serve.Ports{XDS: net.JoinHostPort(ips[i+1], xdsPort), API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
			t.Fatalf("replica %s on %s:%s: %v", id, ips[i+1], xdsPort, err)
		}
		f.replicas = append(f.replicas, l)
	}
	ns := startDNSServer(t, "lbplane.test", ips...)
	bs := startBackends(t, "b0", "b1")
	port := reservePort(t)
	if err := f.push(0, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[0].Port})); err != nil {
		t.Fatal(err)
	}
	f.policies["ha-main"] = true
	tls := envoyTLS(t, f.replicas[0], "envoy-dns", "default")
	tls.ServerName = "lbplane.test" // the name every replica's certificate carries
	e := startEnvoyFrom(t, envoybootstrap.Params{NodeID: "envoy-dns", Group: "default", XDS: "lbplane.test:" + xdsPort, Delta: true,
		TLS: tls, DNSResolvers: []string{ns.Addr}}, "config:info,upstream:info,dns:debug", "--drain-time-s", "1")
	f.envoys = append(f.envoys, e)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "b0")
	eventually(t, 30*time.Second, "the Envoy's xDS cluster holds every address the name resolves to", func() error {
		clusters := e.Clusters(t)
		for _, ip := range ips {
			if !strings.Contains(clusters, "lbplane_xds::"+net.JoinHostPort(ip, xdsPort)+"::") {
				return fmt.Errorf("no host %s:%s in lbplane_xds:\n%s", ip, xdsPort, grepLines(clusters, "lbplane_xds::"))
			}
		}
		return nil
	})
	on := f.placement()["envoy-dns"]
	load := startLoad(url, 60, 2, 2*time.Minute)
	stopLoad := sync.OnceFunc(load.Stop)
	defer stopLoad()
	load.WaitServed(t, 20)
	f.kill(on)
	now := f.placement()["envoy-dns"]
	t.Logf("the Envoy moved from %s to %s", f.ids[on], f.ids[now])
	if err := f.push(now, policy(t, haPolicy, map[string]any{"Name": "ha-main", "Port": port, "Backend": bs[1].Port})); err != nil {
		t.Fatal(err)
	}
	waitServing(t, url, "b1")
	f.converged("after the kill")
	stopLoad()
	load.RequireNoFailures(t, 20)
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
