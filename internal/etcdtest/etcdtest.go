// Package etcdtest runs a real etcd cluster on loopback for tests: one or more members of the etcd built
// by hack/tools.sh etcd, on ports reserved for the whole test (internal/portreserve), each of which can be
// stopped and started again on the same port and data. Members serve clients over TLS and take only clients
// with a certificate from the test's CA (--client-cert-auth), as docs/ha.md sets etcd up; StartPlaintext
// runs one that takes anyone, in plaintext.
package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/lbplane/lbplane/controlplane/pki"
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
	// plaintext: clients in plaintext, without certificates; otherwise ca signs the members' serving
	// certificates and the clients' certificate, whose files TLS names.
	plaintext bool
	// anyClient: TLS, but clients need no certificate (etcd without --client-cert-auth).
	anyClient bool
	ca        *pki.CA
	files     TLSFiles
}

// TLSFiles are the files a client of the cluster uses: the CA that signed the members' certificates, and
// a client certificate and key the members accept.
type TLSFiles struct{ CA, Cert, Key string }

// Member is one etcd member.
type Member struct {
	Name                 string
	ClientPort, PeerPort int
	// IP is the address it listens on (127.0.0.1 unless StartIn placed it in a network namespace); Netns is
	// that namespace ("": this process's).
	IP, Netns string
	scheme    string // of the client URL: https, or http for a plaintext cluster
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
}

// Endpoint is the member's client URL.
func (m *Member) Endpoint() string { return fmt.Sprintf("%s://%s:%d", m.scheme, m.IP, m.ClientPort) }

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
	return startLoopback(t, n, &Cluster{args: args})
}

// StartPlaintext runs an n-member cluster that serves clients in plaintext and takes any client: the etcd
// lbplane refuses without --insecure-etcd.
func StartPlaintext(t TB, n int) *Cluster {
	t.Helper()
	return startLoopback(t, n, &Cluster{args: []string{"--max-txn-ops", "10000"}, plaintext: true})
}

// StartTLSAnyClient runs an n-member cluster that serves clients over TLS but takes clients that present
// no certificate (no --client-cert-auth): the etcd lbplane refuses without --insecure-etcd.
func StartTLSAnyClient(t TB, n int) *Cluster {
	t.Helper()
	return startLoopback(t, n, &Cluster{args: []string{"--max-txn-ops", "10000"}, anyClient: true})
}

func startLoopback(t TB, n int, c *Cluster) *Cluster {
	t.Helper()
	c.t, c.bin, c.dir = t, tools.Require(t, "etcd"), t.TempDir()
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
		m.scheme = "https"
		if c.plaintext {
			m.scheme = "http"
		}
		initial = append(initial, m.Name+"="+m.peerURL())
	}
	if !c.plaintext {
		c.makeCerts()
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
	if !c.plaintext {
		args = append(args, "--cert-file", filepath.Join(c.dir, m.Name+".crt"), "--key-file", filepath.Join(c.dir, m.Name+".key"))
		if !c.anyClient {
			args = append(args, "--client-cert-auth", "--trusted-ca-file", c.files.CA)
		}
	}
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

// makeCerts makes the test's CA, a serving certificate for each member's address and a client certificate.
func (c *Cluster) makeCerts() {
	t := c.t
	t.Helper()
	certPEM, keyPEM, err := pki.NewCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	if c.ca, err = pki.ParseCA("etcdtest", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(c.dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c.files.CA = write("ca.crt", certPEM)
	for _, m := range c.members {
		is, err := c.ca.IssueServer([]string{m.IP, "localhost"}, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		write(m.Name+".crt", is.CertPEM)
		write(m.Name+".key", is.KeyPEM)
	}
	is, err := c.ca.IssueClient("lbplane", "etcd-client", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c.files.Cert, c.files.Key = write("client.crt", is.CertPEM), write("client.key", is.KeyPEM)
}

// TLS are the client files of the cluster (empty for a plaintext one).
func (c *Cluster) TLS() TLSFiles { return c.files }

// ClientTLS is a client TLS config with the cluster's client certificate (nil for a plaintext cluster).
func (c *Cluster) ClientTLS() *tls.Config {
	if c.plaintext {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(c.files.Cert, c.files.Key)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// Flags are lbplane serve's flags that reach the cluster through these endpoints (every member's when
// none are given): --etcd-endpoints and, unless it is plaintext, the client TLS files.
func (c *Cluster) Flags(endpoints ...string) []string {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	out := []string{"--etcd-endpoints", strings.Join(endpoints, ",")}
	if !c.plaintext {
		out = append(out, "--etcd-cacert", c.files.CA, "--etcd-cert", c.files.Cert, "--etcd-key", c.files.Key)
	}
	return out
}

func (c *Cluster) read(ep string) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: c.ClientTLS()})
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
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: c.ClientTLS()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}
