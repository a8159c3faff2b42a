// Package docblocks reads the shell blocks of README.md and docs/*.md, the one description of which block runs
// where (docs/testing.md, "The docs are tested"). The convention:
//
//   - ```sh: a user types it. e2e's TestDocsShellBlocks runs every such block of a page, in order, in one bash,
//     from a scratch directory laid out like the repository's root. `sh session=NAME` starts another bash for
//     the blocks of that name (each session stops before the next starts), for quick starts that stand alone.
//   - ```sh cluster: typed against a Kubernetes cluster. e2e/cluster's TestCluster (make test-cluster) runs
//     them, in order, against the cluster it is given, from the repository's root.
//   - ```sh hosts: typed on each of several hosts (docs/ha.md's replicas). e2e's TestDocsHostsBlocks runs them
//     on hosts made of network namespaces.
//   - ```sh demo (make run: TestDemoOutlivesMakeRun runs it) and ```sh suite (make test, make bench,
//     make test-cluster: the full runs themselves): typed by users, run by their own targets, not here.
//   - ```text: output and illustration, never run. Other shell fences (bash, shell, console, zsh) are refused,
//     so that a block cannot escape the tests by its spelling.
//
// A tag may be followed by words of the form `key=value`: `session=NAME` (a bash of its own) and `host=NAME`
// (for hosts blocks: run on that host only; without it, on every host).
package docblocks

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Tags a sh block may carry; "" is a block that e2e's TestDocsShellBlocks runs.
const (
	Demo    = "demo"
	Suite   = "suite"
	Cluster = "cluster"
	Hosts   = "hosts"
)

// RunBy says which test or target runs the blocks of each tag.
var RunBy = map[string]string{
	"":      "e2e's TestDocsShellBlocks",
	Demo:    "make run (TestDemoOutlivesMakeRun)",
	Suite:   "the long runs themselves (make test, make test-cluster, make bench)",
	Cluster: "e2e/cluster's TestCluster (make test-cluster)",
	Hosts:   "e2e's TestDocsHostsBlocks",
}

// Block is one shell block of a page.
type Block struct {
	Page    string // relative to the repository root
	Line    int    // of the opening fence
	Tag     string // "", demo, suite, cluster, hosts
	Session string // "main" unless session=NAME
	Host    string // host=NAME of a hosts block; "" is every host
	Text    string
}

// Where says where a block is, as page:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// Pages are the pages whose blocks are checked: README.md, then docs/*.md.
func Pages(root string) ([]string, error) {
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{filepath.Join(root, "README.md")}, more...), nil
}

var shellFence = regexp.MustCompile("^```\\s*(sh|bash|shell|console|zsh)\\b(.*)$")

// Read reads a page's shell blocks; a fence that breaks the convention is an error.
func Read(root, page string) ([]Block, error) {
	f, err := os.Open(page)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rel, _ := filepath.Rel(root, page)
	var out []Block
	var cur *Block
	var body []string
	inOther := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == "```":
			cur.Text = unindent(body) + "\n"
			out = append(out, *cur)
			cur, body = nil, nil
		case cur != nil:
			body = append(body, line)
		case inOther:
			if trimmed == "```" {
				inOther = false
			}
		case strings.HasPrefix(trimmed, "```"):
			m := shellFence.FindStringSubmatch(trimmed)
			if m == nil {
				inOther = true
				continue
			}
			if m[1] != "sh" {
				return nil, fmt.Errorf("%s:%d: a ```%s block: write ```sh (run by TestDocsShellBlocks), ```sh demo|suite|cluster|hosts, or ```text", rel, n, m[1])
			}
			b := Block{Page: rel, Line: n, Session: "main"}
			for _, word := range strings.Fields(m[2]) {
				switch {
				case word == Demo || word == Suite || word == Cluster || word == Hosts:
					b.Tag = word
				case strings.HasPrefix(word, "session="):
					b.Session = strings.TrimPrefix(word, "session=")
				case strings.HasPrefix(word, "host="):
					b.Host = strings.TrimPrefix(word, "host=")
				default:
					return nil, fmt.Errorf("%s:%d: unknown tag %q on a sh block (demo, suite, cluster, hosts, session=NAME or host=NAME)", rel, n, word)
				}
			}
			if b.Host != "" && b.Tag != Hosts {
				return nil, fmt.Errorf("%s:%d: host=%s on a block that is not a hosts block", rel, n, b.Host)
			}
			cur = &b
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a sh block is not closed", rel, cur.Line)
	}
	return out, sc.Err()
}

// unindent removes the indentation every line shares (a block inside a list item is indented with it).
func unindent(lines []string) string {
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first || !strings.HasPrefix(ind, prefix) {
			if first {
				prefix, first = ind, false
			} else {
				for !strings.HasPrefix(ind, prefix) {
					prefix = prefix[:len(prefix)-1]
				}
			}
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(out, "\n")
}

// Tagged returns the blocks of every page with the given tag, page by page in the order of Pages.
func Tagged(root, tag string) ([]Block, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, p := range pages {
		blocks, err := Read(root, p)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if b.Tag == tag {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// Sessions groups blocks by session, in the order each session first appears.
func Sessions(blocks []Block) (order []string, by map[string][]Block) {
	by = map[string][]Block{}
	for _, b := range blocks {
		if _, ok := by[b.Session]; !ok {
			order = append(order, b.Session)
		}
		by[b.Session] = append(by[b.Session], b)
	}
	return order, by
}
