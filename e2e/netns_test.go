package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A netHost is a network namespace the test creates, joined to the host by a veth pair. Kubernetes refuses
// loopback addresses in EndpointSlices, so backends that EndpointSlices point at live here, on
// 198.51.100.0/24 (TEST-NET-2: documentation addresses, never routed; TEST-NET-1 is this machine's own
// network). Traffic to them stays on this machine.
type netHost struct {
	name     string
	hostIP   string
	IP       string
	hostLink string
}

var netSeq atomic.Int32

func newNetHost(t *testing.T) *netHost {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("this test creates a network namespace: it needs root and iproute2 (apt-get install iproute2)")
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	// Each namespace takes one /30 of 198.51.100.0/24, and its name says which: `ip netns add` refuses a name
	// that exists, so the name is an exclusive claim on the subnet, between test processes too (two suites
	// on one machine would otherwise put the same host address on two links).
	var h *netHost
	start := int(netSeq.Add(1)) + os.Getpid()
	for i := 0; i < 64 && h == nil; i++ {
		n := (start + i) % 64
		name := fmt.Sprintf("lbp-net%d", n)
		out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
		switch {
		case err == nil:
			h = &netHost{name: name, hostIP: fmt.Sprintf("198.51.100.%d", 4*n+1), IP: fmt.Sprintf("198.51.100.%d", 4*n+2),
				hostLink: fmt.Sprintf("lbp-veth%d", n)}
		case !strings.Contains(string(out), "File exists"):
			t.Fatalf("ip netns add %s: %v %s", name, err, out)
		}
	}
	if h == nil {
		t.Fatal("every network namespace lbp-net0..63 exists: other test runs hold them, or left them (ip netns del)")
	}
	peer := h.hostLink + "p"
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", h.hostLink).Run()
		exec.Command("ip", "netns", "del", h.name).Run()
	})
	run("link", "add", h.hostLink, "type", "veth", "peer", "name", peer)
	run("link", "set", peer, "netns", h.name)
	run("addr", "add", h.hostIP+"/30", "dev", h.hostLink)
	run("link", "set", h.hostLink, "up")
	run("netns", "exec", h.name, "ip", "addr", "add", h.IP+"/30", "dev", peer)
	run("netns", "exec", h.name, "ip", "link", "set", peer, "up")
	run("netns", "exec", h.name, "ip", "link", "set", "lo", "up")
	return h
}

// backend starts a sample backend inside the namespace and waits until it answers.
func (h *netHost) backend(t *testing.T, name string, port int) {
	t.Helper()
	startProcess(t, "backend-"+name+".log", "ip", "netns", "exec", h.name, filepath.Join(binDir, "lbplane-backend"),
		"--listen", fmt.Sprintf("%s:%d", h.IP, port), "--name", name)
	eventually(t, 10*time.Second, name+" listens", func() error {
		_, err := requestVia(newClient(false), fmt.Sprintf("http://%s:%d/", h.IP, port), nil)
		return err
	})
}
