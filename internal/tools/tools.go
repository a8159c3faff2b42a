// Package tools finds the pinned external programs (Envoy, ...) that hack/tools.sh installs into .cache/tools,
// for tests and for the demo. A test that needs a missing tool fails and says how to install it.
package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// RepoRoot is the repository's top directory, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Path asks hack/tools.sh where a tool lives; an environment variable LBPLANE_<TOOL> overrides it.
func Path(tool string) string {
	if p := os.Getenv("LBPLANE_" + strings.ToUpper(strings.ReplaceAll(tool, "-", "_"))); p != "" {
		return p
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "tools.sh"), "path-"+tool).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Require returns the tool's path, or fails the test with the command that installs it.
func Require(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, tool string) string {
	t.Helper()
	p := Path(tool)
	if st, err := os.Stat(p); p == "" || err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s is not installed at %q: run `make tools` (or `hack/tools.sh %s`) first", tool, p, tool)
	}
	return p
}

// Revision is the commit HEAD of the repository (with -dirty when tracked files changed), as the Makefile
// stamps binaries with it, or "unknown" outside a checkout.
func Revision() string {
	out, err := exec.Command("git", "-C", RepoRoot(), "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", RepoRoot(), "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "-dirty"
	}
	return rev
}
