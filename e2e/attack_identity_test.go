package e2e

// An identity ends when it should (issue 28, item 4): an Envoy's xDS stream is closed when its client
// certificate expires, and lbctl revoke cuts a node off at once, refuses its reconnects, and survives a
// restart. Real lbplane, real Envoys.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// connectedNodes lists the node ids connected to l.
func connectedNodes(t *testing.T, l *Lbplane) []string {
	t.Helper()
	ps, err := l.Client.Proxies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.NodeID)
	}
	return out
}

// listening tells whether something accepts connections on a loopback port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// A stream opened with a short-lived certificate is closed at expiry: a policy with a TLS key pushed after
// the expiry never reaches that Envoy. (The finding: a private key pushed 13 s after the
// certificate expired was still delivered.)
func TestAttackXDSStreamOutlivesItsCertificate(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--envoy-cert-validity", "8s", "--files-root", certs(""))
	bs := startBackends(t, "x1")
	dir := t.TempDir()
	notAfter := renewEnvoyCert(t, l, "short-lived", "default", dir)
	startEnvoyWith(t, l, "short-lived", "default", true, &envoybootstrap.TLS{Dir: dir})
	port, late := reservePort(t), reservePort(t)
	push(t, l, policy(t, attackPlain, map[string]any{"Port": port, "B": bs[0].Port}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "x1")
	if time.Now().After(notAfter) {
		t.Fatalf("the Envoy took until after its certificate expired (%s) to serve; the machine is too slow for an 8s certificate", notAfter)
	}
	// The stream ends at expiry.
	eventually(t, time.Until(notAfter)+10*time.Second, "the expired Envoy is disconnected", func() error {
		if nodes := connectedNodes(t, l); len(nodes) != 0 {
			return fmt.Errorf("connected: %v", nodes)
		}
		return nil
	})
	if time.Now().Before(notAfter) {
		t.Fatalf("disconnected before the certificate expired (%s)", notAfter)
	}
	// After expiry, a policy with a TLS key: it must not reach the Envoy.
	push(t, l, policy(t, attackHTTPS, map[string]any{"Name": "after-expiry", "Port": late, "Cert": "app.example.com.crt", "Key": "app.example.com.key", "B": bs[0].Port}))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if listening(late) {
			t.Fatalf("a listener (and its private key) pushed after the certificate expired reached the Envoy")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if nodes := connectedNodes(t, l); len(nodes) != 0 {
		t.Fatalf("the expired Envoy reconnected: %v", nodes)
	}
	// The control: with a renewed certificate the same Envoy reconnects and gets it.
	renewEnvoyCert(t, l, "short-lived", "default", dir)
	eventually(t, 60*time.Second, "the Envoy with a renewed certificate gets the new listener", func() error {
		if !listening(late) {
			return fmt.Errorf("port %d not listening", late)
		}
		return nil
	})
}

// lbctl revoke --node closes the node's stream at once, refuses its reconnects, leaves other nodes alone,
// and survives a restart of lbplane.
func TestAttackRevokeNodeCutsItOff(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	bs := startBackends(t, "r1")
	startEnvoyInGroup(t, l, "stolen", "a", true)
	startEnvoyInGroup(t, l, "honest", "b", true)
	portA, portB := reservePort(t), reservePort(t)
	push(t, l, inGroup(policy(t, attackPlain, map[string]any{"Port": portA, "B": bs[0].Port}), "a"))
	doc := strings.Replace(string(inGroup(policy(t, attackPlain, map[string]any{"Port": portB, "B": bs[0].Port}), "b")), "name: plain", "name: plain-b", 1)
	push(t, l, []byte(doc))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", portA), "r1")
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", portB), "r1")
	waitSynced(t, l, 2)

	start := time.Now()
	out := lbctlOK(t, l, "revoke", "--node", "stolen", "--reason", "host lost")
	if !strings.Contains(out, "node stolen revoked until") || !strings.Contains(out, "1 connection(s) closed") {
		t.Errorf("lbctl revoke said: %q", out)
	}
	eventually(t, 5*time.Second, "the revoked node is disconnected", func() error {
		if nodes := connectedNodes(t, l); !slices.Equal(nodes, []string{"honest"}) {
			return fmt.Errorf("connected: %v", nodes)
		}
		return nil
	})
	t.Logf("cut off %s after lbctl revoke started", time.Since(start).Round(time.Millisecond))
	// A change for both groups: only the honest one gets it.
	newA, newB := reservePort(t), reservePort(t)
	push(t, l, []byte(strings.Replace(string(inGroup(policy(t, attackPlain, map[string]any{"Port": newA, "B": bs[0].Port}), "a")), "name: plain", "name: plain-a2", 1)))
	push(t, l, []byte(strings.Replace(string(inGroup(policy(t, attackPlain, map[string]any{"Port": newB, "B": bs[0].Port}), "b")), "name: plain", "name: plain-b2", 1)))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", newB), "r1")
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if listening(newA) {
			t.Fatal("the revoked node got a change pushed after its revocation")
		}
		if slices.Contains(connectedNodes(t, l), "stolen") {
			t.Fatal("the revoked node reconnected")
		}
		time.Sleep(200 * time.Millisecond)
	}
	list := lbctlOK(t, l, "revoke", "--list")
	if !strings.Contains(list, "stolen") || !strings.Contains(list, "host lost") {
		t.Errorf("lbctl revoke --list: %q", list)
	}

	// After a restart, the revocation still holds; the honest node is back.
	l.Process.Kill()
	l.Restart(t)
	eventually(t, 60*time.Second, "the honest node reconnects after the restart", func() error {
		if nodes := connectedNodes(t, l); !slices.Contains(nodes, "honest") {
			return fmt.Errorf("connected: %v", nodes)
		}
		return nil
	})
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if slices.Contains(connectedNodes(t, l), "stolen") {
			t.Fatal("the revoked node reconnected after lbplane restarted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if list := lbctlOK(t, l, "revoke", "--list", "-o", "json"); !strings.Contains(list, `"nodeId": "stolen"`) && !strings.Contains(list, `"nodeId":"stolen"`) {
		t.Errorf("after the restart, lbctl revoke --list: %s", list)
	}
}

// In Kubernetes mode the revocations live in a ConfigMap every replica reads: a revocation made through
// one replica cuts the node off the other replica it is connected to, and still holds after that replica
// restarts. Real kube-apiserver and etcd, two lbplane replicas sharing one CA Secret.
func TestAttackRevokeKubernetesReachesEveryReplica(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	args := []string{"--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--namespace", "default",
		"--ca-secret", "lbplane-ca", "--revocations-configmap", "lbplane-revocations"}
	l1 := startLbplane(t, args...)
	l2 := startLbplane(t, args...)
	startEnvoy(t, l1, "kube-stolen", true)
	eventually(t, 60*time.Second, "the Envoy connects to replica 1", func() error {
		if nodes := connectedNodes(t, l1); !slices.Equal(nodes, []string{"kube-stolen"}) {
			return fmt.Errorf("connected: %v", nodes)
		}
		return nil
	})
	out := lbctlOK(t, l2, "revoke", "--node", "kube-stolen", "--reason", "lost")
	if !strings.Contains(out, "node kube-stolen revoked until") {
		t.Errorf("lbctl revoke through replica 2 said: %q", out)
	}
	eventually(t, 15*time.Second, "replica 1 closes the revoked node's connection", func() error {
		if nodes := connectedNodes(t, l1); len(nodes) != 0 {
			return fmt.Errorf("connected: %v", nodes)
		}
		return nil
	})
	cm, err := kubectl(t, cluster.Kubeconfig, "", "get", "configmap", "lbplane-revocations", "-o", "jsonpath={.data.revocations\\.json}")
	if err != nil || !strings.Contains(cm, `"nodeId":"kube-stolen"`) {
		t.Errorf("the revocations ConfigMap: %v %s", err, cm)
	}
	l1.Kill()
	l1.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if nodes := connectedNodes(t, l1); len(nodes) != 0 {
			t.Fatalf("the revoked node reconnected after replica 1 restarted: %v", nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if list := lbctlOK(t, l1, "revoke", "--list"); !strings.Contains(list, "kube-stolen") {
		t.Errorf("replica 1 after its restart: lbctl revoke --list: %q", list)
	}
}
