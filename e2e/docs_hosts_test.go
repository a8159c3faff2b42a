package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/docblocks"
	"github.com/lbplane/lbplane/internal/tools"
)

// docHost is one host of the docs' ```sh hosts blocks: a network namespace on the test's switch (haLAN), with a
// host name of its own (a UTS namespace), an /etc/hosts naming every host, and /etc and /var/lib of its own,
// as on a fresh host: this machine's, seen through an overlay (a mount namespace of its own) whose writes
// stay the host's, and in which lbplane's and etcd's folders (/etc/lbplane, /var/lib/lbplane, /var/lib/etcd,
// /var/lib/lbplane-envoy) do not exist, even when this machine has them. One bash per host reads the blocks
// from a pipe, as a user types them into a terminal on that host: what a block exports or starts stays for
// the next.
type docHost struct {
	name   string
	dir    string // the host's folders: hosts, the overlays' upper and work folders, home
	cmd    *exec.Cmd
	stdin  *os.File
	log    string
	n      int           // blocks sent
	exited chan struct{} // closed when the host's bash has ended
}

// docHostOverlays are the folders each host sees through an overlay of its own, and docHostFresh what a
// fresh host lacks in them.
var (
	docHostOverlays = map[string]string{"/etc": "etc", "/var/lib": "var-lib"}
	docHostFresh    = []string{"/etc/lbplane", "/var/lib/lbplane", "/var/lib/etcd", "/var/lib/lbplane-envoy"}
)

func startDocHost(t *testing.T, lan *haLAN, i int, name, hostsFile, path string) *docHost {
	t.Helper()
	h := &docHost{name: name, dir: t.TempDir()}
	if err := os.Mkdir(filepath.Join(h.dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "hosts"), []byte(hostsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var setup strings.Builder
	fmt.Fprintf(&setup, "set -e; hostname %s\n", name)
	for target, sub := range docHostOverlays {
		upper, work := filepath.Join(h.dir, sub+"-upper"), filepath.Join(h.dir, sub+"-work")
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// A folder this machine has and a fresh host lacks is hidden by a whiteout (a 0/0 character device).
		for _, fresh := range docHostFresh {
			if filepath.Dir(fresh) != target {
				continue
			}
			if _, err := os.Lstat(fresh); err == nil {
				if err := syscall.Mknod(filepath.Join(upper, filepath.Base(fresh)), syscall.S_IFCHR, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		fmt.Fprintf(&setup, "mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s\n", target, upper, work, target)
	}
	fmt.Fprintf(&setup, "mount --bind %s /etc/hosts\n", filepath.Join(h.dir, "hosts"))
	for _, fresh := range docHostFresh {
		fmt.Fprintf(&setup, "! test -e %s\n", fresh)
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
		// The blocks' own processes (etcd, lbplane, Envoy) share the host bash's process group.
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
			for _, f := range []string{"etcd.log", "lbplane.log", "envoy.log"} {
				if b, err := os.ReadFile(filepath.Join(h.dir, "home", f)); err == nil {
					t.Logf("host %s, %s (last 3000 bytes):\n%s", name, f, b[max(0, len(b)-3000):])
				}
			}
		}
	})
	return h
}

// docHostsSSH is the ssh the hosts' blocks call: the hosts are network namespaces without an sshd, so
// "ssh [OPTIONS] [USER@]HOST COMMAND" runs COMMAND with bash on HOST itself (in the namespaces of its
// terminal's bash, whose process ids follow), with the caller's standard input and output, as ssh would.
const docHostsSSH = `#!/bin/bash
set -e
while [[ $1 == -* ]]; do shift; done
host=${1#*@}; shift
pid=$(sed -n "s/^$host //p" "$(dirname "$0")/hosts.pids")
if [[ -z $pid ]]; then echo "ssh: Could not resolve hostname $host" >&2; exit 255; fi
exec nsenter --target "$pid" --mount --uts --net -- bash -c "cd; $*"
`

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

// TestDocsHostsBlocks runs docs/ha.md's ```sh hosts blocks as typed, in order, on three fresh hosts made of
// network namespaces (lb1, lb2, lb3 on a switch in 198.18.0.0/15, named in each host's /etc/hosts; no
// /etc/lbplane, /var/lib/lbplane or /var/lib/etcd): a block for every host is typed on each, one tagged
// host=NAME on that host alone; the docs' own commands copy files between the hosts (ssh: docHostsSSH). Then
// every replica must answer lbctl status as a member of the same etcd store, one leader and two followers,
// serve the policy moved from a standalone store, and show the backend health that the docs' Envoy reports
// from its stats port.
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
	// On every host's PATH: lbplane and lbctl, etcd, Envoy, and the ssh between the hosts.
	sshDir := t.TempDir()
	path := strings.Join([]string{sshDir, filepath.Dir(tools.Require(t, "etcd")), filepath.Dir(tools.Require(t, "envoy")), binDir, os.Getenv("PATH")}, ":")
	hosts := map[string]*docHost{}
	var pids strings.Builder
	for i, n := range names {
		hosts[n] = startDocHost(t, lan, i, n, hostsFile, path)
		fmt.Fprintf(&pids, "%s %d\n", n, hosts[n].cmd.Process.Pid)
	}
	if err := os.WriteFile(filepath.Join(sshDir, "hosts.pids"), []byte(pids.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sshDir, "ssh"), []byte(docHostsSSH), 0o755); err != nil {
		t.Fatal(err)
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
	for _, b := range sessions[order[0]] {
		on := names
		if b.Host != "" {
			if hosts[b.Host] == nil {
				t.Fatalf("%s: host=%s is none of the hosts %v", b.Where(), b.Host, names)
			}
			on = []string{b.Host}
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
		// The docs' Envoy (on lb1) reports the policy's backends from its stats port to every replica: each
		// shows their health within a minute (polled every second).
		check := docblocks.Block{Page: "TestDocsHostsBlocks", Line: 0, Text: `lbctl status
lbctl get moved
for i in $(seq 60); do lbctl status moved > moved.txt 2>&1 || true; grep -q '^BACKEND' moved.txt && break; sleep 1; done
cat moved.txt
`}
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
		if !regexp.MustCompile(`(?m)^BACKEND\s+PROXIES[^\n]*\n\s*app\s+1\s`).MatchString(last) {
			t.Errorf("host %s: lbctl status moved shows no backend health read from the docs' Envoy:\n%s", n, last)
		}
		if !found {
			t.Errorf("host %s: lbctl status does not say it is replica %s of the etcd store, leader or follower:\n%s", n, n, last)
		}
	}
	if roles["leader"] != 1 || roles["follower"] != len(names)-1 {
		t.Errorf("roles %v: want one leader and %d followers", roles, len(names)-1)
	}
}
