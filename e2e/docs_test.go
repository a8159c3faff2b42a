package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/docblocks"
	"github.com/lbplane/lbplane/internal/tools"
)

// The docs' shell blocks are run as typed (docs/testing.md, "The docs are tested"); internal/docblocks reads
// them and holds the convention: which tag runs where. Here, TestDocsShellBlocks runs the untagged ```sh blocks
// and TestDocsHostsBlocks the ```sh hosts ones; e2e/cluster's TestCluster runs the ```sh cluster ones.
//
// Each session runs in a network namespace of its own (docNetns), so the blocks run exactly as typed, on the
// demo's ports and the defaults, beside `make run` and other tests. Where no namespace can be made, the ports
// the docs name (the demo's) are moved by one offset instead, in the blocks and in the examples they push.
// `make build` is a no-op (the harness built bin/), any other make target fails.

// docPages are the pages whose blocks are checked.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := docblocks.Pages(tools.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// docPorts are the ports the docs' blocks and the examples they push use.
var docPorts = demoPorts

var docPortPattern = regexp.MustCompile(`\b(18000|18001|18002|18081|18082|18083|19001|10080)\b`)

func shiftDocPorts(s string, off int) string {
	return docPortPattern.ReplaceAllStringFunc(s, func(p string) string {
		n, _ := strconv.Atoi(p)
		return strconv.Itoa(n + off)
	})
}

// docScratch lays out a directory like the repository's root for the blocks to run in.
func docScratch(t *testing.T, off int) string {
	t.Helper()
	root := tools.RepoRoot()
	dir := t.TempDir()
	for name, target := range map[string]string{
		"bin":    binDir,
		"hack":   filepath.Join(root, "hack"),
		".cache": filepath.Join(root, ".cache"),
		"go.mod": filepath.Join(root, "go.mod"), // what lbctl envoy recognises a checkout by
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	examples, err := filepath.Glob(filepath.Join(root, "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range examples {
		if st, err := os.Stat(e); err == nil && st.IsDir() { // examples/certs: used as it is
			if err := os.Symlink(e, filepath.Join(dir, "examples", filepath.Base(e))); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "examples", filepath.Base(e)), []byte(shiftDocPorts(string(b), off)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const docPrelude = `set -eo pipefail
make() {
  case "$*" in
    build) echo "docs test: make build is a no-op here (bin/ holds the binaries the harness built)" ;;
    *) echo "docs test: make $* is not run by this test" >&2; return 1 ;;
  esac
}
trap 'echo "docs test: failed: $BASH_COMMAND" >&2' ERR
`

// runDocSession runs one session's blocks in one bash, in its own process group, and stops every process it
// started, whatever happens.
func runDocSession(t *testing.T, name string, blocks []docblocks.Block) {
	t.Helper()
	netns := docNetns()
	off := 0
	if netns == nil {
		off = docOffset(t)
		t.Logf("no network namespace can be made here (root, or unprivileged user namespaces, and iproute2): the ports the blocks name are moved by %d; the ones they leave to defaults are not", off)
	}
	dir := docScratch(t, off)
	prelude := docPrelude
	if netns != nil {
		prelude += "ip link set lo up\n"
	}
	script := docblocks.Script(prelude, blocks, func(text string) string { return shiftDocPorts(text, off) })
	scriptPath := filepath.Join(dir, "docs-blocks.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "docs-blocks.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = dir
	cmd.Env = docblocks.Environ()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if netns != nil {
		cmd.SysProcAttr = netns()
		cmd.SysProcAttr.Setpgid = true
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	runErr := cmd.Wait()
	// The blocks' own processes (backends, lbplane, Envoy) share the script's process group.
	syscall.Kill(-pgid, syscall.SIGTERM)
	eventually(t, 15*time.Second, "the blocks' processes to stop", func() error {
		if syscall.Kill(-pgid, 0) == nil {
			syscall.Kill(-pgid, syscall.SIGKILL)
			return fmt.Errorf("process group %d still has processes", pgid)
		}
		return nil
	})
	out, _ := os.ReadFile(logPath)
	if runErr != nil || !strings.Contains(string(out), docblocks.Done) {
		t.Fatalf("session %s: %v (port offset %d); output:\n%s", name, runErr, off, out)
	}
	t.Logf("session %s: %d blocks ran (port offset %d)", name, len(blocks), off)
}

// docNetns returns a maker of process attributes that start the blocks in a network namespace of their own,
// with a loopback of their own, or nil when this machine cannot make one. There the blocks run exactly as
// typed, on the ports they name and the ones they leave to defaults, beside make run and every other test.
// Root makes a network namespace; another user a user namespace (mapped to root inside) with one.
func docNetns() func() *syscall.SysProcAttr {
	docNetnsOnce.Do(func() {
		candidates := []func() *syscall.SysProcAttr{
			func() *syscall.SysProcAttr { return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET} },
			func() *syscall.SysProcAttr {
				return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
					UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
					GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
			},
		}
		if os.Geteuid() != 0 {
			candidates = candidates[1:]
		}
		for _, c := range candidates {
			cmd := exec.Command("ip", "link", "set", "lo", "up")
			cmd.SysProcAttr = c()
			if cmd.Run() == nil {
				docNetnsMaker = c
				return
			}
		}
	})
	return docNetnsMaker
}

var (
	docNetnsOnce  sync.Once
	docNetnsMaker func() *syscall.SysProcAttr
)

// docOffset is demoOffset for the docs' ports.
func docOffset(t *testing.T) int {
	t.Helper()
	off := demoOffset(t)
	for _, p := range docPorts {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+off))
		if err != nil {
			t.Fatalf("port %d is taken after the offset was chosen: %v", p+off, err)
		}
		l.Close()
	}
	return off
}

// TestDocsShellBlocksFollowTheConvention needs no Envoy: every shell block of README.md and docs/ is spelled
// as the convention says, and the pages that teach a path have blocks that run.
func TestDocsShellBlocksFollowTheConvention(t *testing.T) {
	t.Parallel()
	runnable := map[string]int{}
	for _, page := range docPages(t) {
		blocks, err := docblocks.Read(tools.RepoRoot(), page)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			if b.Tag == "" {
				runnable[b.Page]++
			}
			// The README promises a five-line quick start for each way in that works as typed: the
			// sessions are run below; here, they stay five readable lines.
			if b.Page == "README.md" && b.Session != "main" {
				lines := strings.Split(strings.TrimRight(b.Text, "\n"), "\n")
				if len(lines) > 5 {
					t.Errorf("%s:%d: the %s quick start has %d lines; at most 5", b.Page, b.Line, b.Session, len(lines))
				}
				for i, l := range lines {
					if len(l) > 120 {
						t.Errorf("%s:%d: a quick start line of %d columns; at most 120", b.Page, b.Line+1+i, len(l))
					}
				}
			}
		}
	}
	// Each task page opens with what the reader will have when finished.
	for _, page := range docPages(t)[1:] {
		rel, _ := filepath.Rel(tools.RepoRoot(), page)
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 8)
		if !strings.Contains(strings.Join(lines[:min(len(lines), 7)], "\n"), "When you finish this page you will") {
			t.Errorf("%s does not open with what the reader will have when finished (\"When you finish this page you will ...\")", rel)
		}
	}
	for _, page := range []string{"README.md", "docs/getting-started.md", "docs/operations.md"} {
		if runnable[page] == 0 {
			t.Errorf("%s has no sh block that the docs test runs", page)
		}
	}
}

// TestDocsShellBlocks runs every ```sh block of README.md and docs/*.md as a user would type it, with real
// binaries, the pinned Envoy and backends on loopback, and fails when a block fails.
func TestDocsShellBlocks(t *testing.T) {
	t.Parallel() // each session has its own network namespace (or ports outside the ephemeral range)
	tools.Require(t, "envoy")
	for _, page := range docPages(t) {
		blocks, err := docblocks.Read(tools.RepoRoot(), page)
		if err != nil {
			t.Fatal(err)
		}
		var run []docblocks.Block
		for _, b := range blocks {
			if b.Tag != "" {
				t.Logf("not run here (%s: run by %s): %s", b.Tag, docblocks.RunBy[b.Tag], b.Where())
				continue
			}
			run = append(run, b)
		}
		order, sessions := docblocks.Sessions(run)
		rel, _ := filepath.Rel(tools.RepoRoot(), page)
		for _, s := range order {
			t.Run(strings.ReplaceAll(rel, "/", "_")+"/"+s, func(t *testing.T) {
				runDocSession(t, s, sessions[s])
			})
		}
	}
}
