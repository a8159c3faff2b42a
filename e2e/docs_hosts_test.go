package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/docblocks"
	"github.com/lbplane/lbplane/internal/tools"
)

// docHost is one host of the docs' ```sh hosts blocks: a network namespace on the test's switch (haLAN), with a
// host name of its own (a UTS namespace), an /etc/hosts naming every host, and its own /etc/lbplane,
// /var/lib/etcd and /var/lib/lbplane (bind mounts in a mount namespace of its own, over folders of the test).
// One bash per host reads the blocks from a pipe, as a user types them into a terminal on that host: what a
// block exports or starts stays for the next.
type docHost struct {
	name   string
	dir    string // the host's folders: hosts, etc-lbplane, var-lib-etcd, var-lib-lbplane, home
	cmd    *exec.Cmd
	stdin  *os.File
	log    string
	n      int           // blocks sent
	exited chan struct{} // closed when the host's bash has ended
}

// docHostMounts are the folders each host has for itself, under its dir.
var docHostMounts = map[string]string{"/etc/lbplane": "etc-lbplane", "/var/lib/etcd": "var-lib-etcd", "/var/lib/lbplane": "var-lib-lbplane"}

func startDocHost(t *testing.T, lan *haLAN, i int, name, hostsFile string) *docHost {
	t.Helper()
	h := &docHost{name: name, dir: t.TempDir()}
	for _, sub := range append([]string{"home"}, mapValues(docHostMounts)...) {
		if err := os.Mkdir(filepath.Join(h.dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.dir, "hosts"), []byte(hostsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var setup strings.Builder
	fmt.Fprintf(&setup, "set -e; hostname %s; mount --bind %s /etc/hosts\n", name, filepath.Join(h.dir, "hosts"))
	for target, sub := range docHostMounts {
		fmt.Fprintf(&setup, "mount --bind %s %s\n", filepath.Join(h.dir, sub), target)
	}
	fmt.Fprintf(&setup, "cd %s; exec bash -e -o pipefail\n", filepath.Join(h.dir, "home"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdin = w
	h.log = filepath.Join(h.dir, "bash.log")
	logFile, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	h.cmd = exec.Command("ip", "netns", "exec", lan.hosts[i], "unshare", "--mount", "--uts", "--propagation", "private", "bash", "-c", setup.String())
	h.cmd.Stdin, h.cmd.Stdout, h.cmd.Stderr = r, logFile, logFile
	path := filepath.Dir(tools.Require(t, "etcd")) + ":" + binDir + ":" + os.Getenv("PATH")
	h.cmd.Env = []string{"PATH=" + path, "HOME=" + filepath.Join(h.dir, "home"), "LANG=C.UTF-8"}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	logFile.Close()
	pgid := h.cmd.Process.Pid
	exited := make(chan struct{})
	h.exited = exited
	go func() { h.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// The blocks' own processes (etcd, lbplane) share the host bash's process group.
		w.Close()
		syscall.Kill(-pgid, syscall.SIGTERM)
		eventually(t, 20*time.Second, "the processes of host "+name+" to stop", func() error {
			if syscall.Kill(-pgid, 0) == nil {
				syscall.Kill(-pgid, syscall.SIGKILL)
				return fmt.Errorf("process group %d still has processes", pgid)
			}
			return nil
		})
		<-exited
		if t.Failed() {
			out, _ := os.ReadFile(h.log)
			t.Logf("host %s, its terminal:\n%s", name, out)
			for _, f := range []string{"etcd.log", "lbplane.log"} {
				if b, err := os.ReadFile(filepath.Join(h.dir, "home", f)); err == nil {
					t.Logf("host %s, %s (last 3000 bytes):\n%s", name, f, b[max(0, len(b)-3000):])
				}
			}
		}
	})
	return h
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// send types a block into the host's bash; wait reads its terminal until the block has ended.
func (h *docHost) send(t *testing.T, b docblocks.Block) {
	t.Helper()
	h.n++
	text := fmt.Sprintf("echo '### %s: block %s'\n%s\necho '### %s: done %d'\n", h.name, b.Where(), b.Text, h.name, h.n)
	if _, err := h.stdin.WriteString(text); err != nil {
		t.Fatalf("host %s: its bash has gone (a block before failed): %v", h.name, err)
	}
}

func (h *docHost) wait(t *testing.T, b docblocks.Block, timeout time.Duration) string {
	t.Helper()
	done := fmt.Sprintf("### %s: done %d", h.name, h.n)
	deadline := time.Now().Add(timeout)
	for {
		out, _ := os.ReadFile(h.log)
		if strings.Contains(string(out), done) {
			return string(out)
		}
		ended := false
		select {
		case <-h.exited:
			ended = true
		default:
		}
		if ended || time.Now().After(deadline) {
			t.Fatalf("host %s: %s failed (or did not end within %s); its terminal:\n%s", h.name, b.Where(), timeout, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDocsHostsBlocks runs docs/ha.md's ```sh hosts blocks as typed, in order, on three hosts made of network
// namespaces (lb1, lb2, lb3 on a switch in 198.18.0.0/15, named in each host's /etc/hosts): a block for every
// host is typed on each, one tagged host=NAME on that host alone; what a block made once on one host and the
// docs say to copy to every host (/etc/lbplane) is copied before the next block for every host. Then every
// replica must answer lbctl status as a member of the same etcd store, one leader and two followers.
func TestDocsHostsBlocks(t *testing.T) {
	t.Parallel()
	tools.Require(t, "etcd")
	blocks, err := docblocks.Tagged(tools.RepoRoot(), docblocks.Hosts)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"lb1", "lb2", "lb3"}
	lan := newHALAN(t, len(names))
	hostsFile := "127.0.0.1 localhost\n"
	for i, n := range names {
		hostsFile += fmt.Sprintf("%s %s\n", lan.hostIP(i), n)
	}
	// The folders each host mounts its own over: made here when the machine has none, and removed after.
	for target := range docHostMounts {
		if _, err := os.Stat(target); os.IsNotExist(err) {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(target) })
		}
	}
	hosts := map[string]*docHost{}
	for i, n := range names {
		hosts[n] = startDocHost(t, lan, i, n, hostsFile)
	}
	// Step 3 moves a standalone lbplane's store into etcd: lb1 has one, with a policy in it, as a reader who
	// ran lbplane before has. Every replica must serve that policy at the end.
	policy := `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: moved}
spec:
  listener: {port: 10080, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 198.51.100.7, port: 8080}]
`
	if err := os.WriteFile(filepath.Join(hosts["lb1"].dir, "home", "moved.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	standalone := docblocks.Block{Page: "TestDocsHostsBlocks: a standalone lbplane that ran before", Text: `lbplane serve --data-dir /var/lib/lbplane > standalone.log 2>&1 & standalone=$!
lbctl --token-file /var/lib/lbplane/token --wait-server 60s push-config -f moved.yaml
kill $standalone && wait $standalone || true
`}
	hosts["lb1"].send(t, standalone)
	hosts["lb1"].wait(t, standalone, 2*time.Minute)
	order, sessions := docblocks.Sessions(blocks)
	if len(order) != 1 {
		t.Fatalf("docs/ha.md's hosts blocks are one setup, typed in one session on each host; found sessions %v", order)
	}
	copyFrom := "" // a host whose /etc/lbplane the docs say to copy to every host
	for _, b := range sessions[order[0]] {
		on := names
		if b.Host != "" {
			if hosts[b.Host] == nil {
				t.Fatalf("%s: host=%s is none of the hosts %v", b.Where(), b.Host, names)
			}
			on = []string{b.Host}
			copyFrom = b.Host
		} else if copyFrom != "" {
			src := filepath.Join(hosts[copyFrom].dir, docHostMounts["/etc/lbplane"])
			for _, n := range names {
				if n != copyFrom {
					copyTree(t, src, filepath.Join(hosts[n].dir, docHostMounts["/etc/lbplane"]))
				}
			}
			copyFrom = ""
		}
		// A block for every host is typed on each before any is waited for: etcd's members start together.
		for _, n := range on {
			hosts[n].send(t, b)
		}
		for _, n := range on {
			hosts[n].wait(t, b, 3*time.Minute)
		}
		t.Logf("ran %s on %v", b.Where(), on)
	}
	// Every replica serves: lbctl status on each (the variables of the docs' check) says which role it has.
	roles := map[string]int{}
	for _, n := range names {
		check := docblocks.Block{Page: "TestDocsHostsBlocks", Line: 0, Text: "lbctl status\nlbctl get moved\n"}
		hosts[n].send(t, check)
		out := hosts[n].wait(t, check, time.Minute)
		last := out[strings.LastIndex(out, "block TestDocsHostsBlocks:0"):]
		sc := bufio.NewScanner(strings.NewReader(last))
		found := false
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, "Store: etcd, replica "+n+", role leader") {
				roles["leader"]++
				found = true
			} else if strings.Contains(l, "Store: etcd, replica "+n+", role follower") {
				roles["follower"]++
				found = true
			}
		}
		if !strings.Contains(last, "moved") || !strings.Contains(last, "10080") {
			t.Errorf("host %s: lbctl get does not show the policy moved from the standalone store:\n%s", n, last)
		}
		if !found {
			t.Errorf("host %s: lbctl status does not say it is replica %s of the etcd store, leader or follower:\n%s", n, n, last)
		}
	}
	if roles["leader"] != 1 || roles["follower"] != len(names)-1 {
		t.Errorf("roles %v: want one leader and %d followers", roles, len(names)-1)
	}
}

// copyTree copies the files of src into dst (one level, as /etc/lbplane holds), keeping their modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		info, _ := e.Info()
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}
