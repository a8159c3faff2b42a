// Package etcdtest runs a real etcd cluster on loopback for tests: one or more members of the etcd built
// by hack/tools.sh etcd, on ports reserved for the whole test (internal/portreserve), each of which can be
// stopped and started again on the same port and data.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lbplane/lbplane/internal/portreserve"
	"github.com/lbplane/lbplane/internal/tools"
)

// TB is the part of testing.TB the cluster uses (the bench runner passes its own).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Cluster is a running etcd cluster.
type Cluster struct {
	t       TB
	bin     string
	dir     string
	members []*Member
	initial string
	args    []string
}

// Member is one etcd member.
type Member struct {
	Name                 string
	ClientPort, PeerPort int
	// IP is the address it listens on (127.0.0.1 unless StartIn placed it in a network namespace); Netns is
	// that namespace ("": this process's).
	IP, Netns string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
}

// Endpoint is the member's client URL.
func (m *Member) Endpoint() string { return fmt.Sprintf("http://%s:%d", m.IP, m.ClientPort) }

// peerURL is the member's peer URL.
func (m *Member) peerURL() string { return fmt.Sprintf("http://%s:%d", m.IP, m.PeerPort) }

// Start runs an n-member cluster until the test ends and waits until it answers.
func Start(t TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, "--max-txn-ops", "10000")
}

// StartWith is Start with these etcd flags instead of the tests' --max-txn-ops 10000.
func StartWith(t TB, n int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: tools.Require(t, "etcd"), dir: t.TempDir(), args: args}
	for i := range n {
		c.members = append(c.members, &Member{Name: fmt.Sprintf("m%d", i), IP: "127.0.0.1", ClientPort: portreserve.Reserve(t), PeerPort: portreserve.Reserve(t)})
	}
	c.run()
	return c
}

// Place is where StartIn runs one member: a network namespace the test created, and the member's address
// in it. The namespace is the member's alone, so its ports are fixed (2379, 2380).
type Place struct{ Netns, IP string }

// StartIn runs one member in each place until the test ends and waits until the cluster answers.
func StartIn(t TB, places []Place, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: tools.Require(t, "etcd"), dir: t.TempDir(), args: args}
	for i, p := range places {
		c.members = append(c.members, &Member{Name: fmt.Sprintf("m%d", i), IP: p.IP, Netns: p.Netns, ClientPort: 2379, PeerPort: 2380})
	}
	c.run()
	return c
}

// run starts every member and waits for the cluster.
func (c *Cluster) run() {
	t := c.t
	t.Helper()
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.Name+"="+m.peerURL())
	}
	c.initial = strings.Join(initial, ",")
	for i := range c.members {
		c.StartMember(i)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.StopMember(i)
		}
	})
	c.WaitHealthy(time.Minute)
}

// Members are the cluster's members.
func (c *Cluster) Members() []*Member { return c.members }

// Endpoints are every member's client URL.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.Endpoint()
	}
	return out
}

// StartMember starts member i (again, on its ports and data).
func (c *Cluster) StartMember(i int) {
	c.t.Helper()
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, m.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	args := append([]string{"--name", m.Name, "--data-dir", filepath.Join(c.dir, m.Name),
		"--listen-client-urls", m.Endpoint(), "--advertise-client-urls", m.Endpoint(),
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", c.initial, "--initial-cluster-token", "lbplane-test",
		"--heartbeat-interval", "100", "--election-timeout", "1000",
		"--log-level", "warn", "--socket-reuse-port"}, c.args...)
	cmd := exec.Command(c.bin, args...)
	if m.Netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", m.Netns, c.bin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("etcd %s: %v", m.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	m.cmd, m.exited = cmd, exited
}

// StopMember kills member i and waits until it is gone.
func (c *Cluster) StopMember(i int) {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

// WaitHealthy waits until a linearizable read through every running member succeeds.
func (c *Cluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	var eps []string
	for _, m := range c.members {
		m.mu.Lock()
		if m.cmd != nil {
			eps = append(eps, m.Endpoint())
		}
		m.mu.Unlock()
	}
	deadline := time.Now().Add(timeout)
	for _, ep := range eps {
		for {
			err := c.read(ep)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("etcd %s did not answer within %s: %v", ep, timeout, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (c *Cluster) read(ep string) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), 2*time.Second)
	defer cancel()
	_, err = cl.Get(ctx, "health")
	return err
}

// Client is a client of every member, closed when the test ends.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}
