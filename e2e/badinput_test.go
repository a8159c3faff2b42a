package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/internal/tools"
)

// Every file of testdata/bad is refused by the push API of a running lbplane with the error it expects, and
// afterwards the accepted policies and Envoy's config are exactly what they were.
func TestBadInputsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "testdata", "bad", "*.yaml"))
	if len(files) < 150 {
		t.Fatalf("only %d bad inputs", len(files))
	}
	bs := startBackends(t, "keep")
	l := startLbplane(t)
	e := startEnvoy(t, l, "envoy-1", true)
	// "existing" is what the port-conflict cases collide with; it must be exactly the document they carry.
	existing, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "testdata", "bad", "166-in-use-same-host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	push(t, l, []byte(strings.SplitN(string(existing), "---\n", 2)[0]))
	push(t, l, []byte(strings.ReplaceAll(string(roundRobinFor(t, bs)), "name: p", "name: keep")))
	waitSynced(t, l, 1)
	getBefore, _, _ := lbctl(t, l, "", "get", "-A", "-o", "json")
	dumpBefore := e.ConfigDump(t)

	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Client.Apply(context.Background(), data, false)
		var apiErr *pushapi.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: accepted (%v)", filepath.Base(f), err)
			continue
		}
		all := strings.Join(apiErr.Errors, "\n")
		for _, line := range strings.Split(string(data), "\n") {
			want, ok := strings.CutPrefix(line, "# expect: ")
			if !ok {
				break
			}
			if !strings.Contains(all, want) {
				t.Errorf("%s: error lacks %q:\n%.1000s", filepath.Base(f), want, all)
			}
		}
	}
	waitSynced(t, l, 1)
	if getAfter, _, _ := lbctl(t, l, "", "get", "-A", "-o", "json"); stripVolatile(getAfter) != stripVolatile(getBefore) {
		t.Errorf("the accepted policies changed")
	}
	if e.ConfigDump(t) != dumpBefore {
		t.Errorf("Envoy's config changed")
	}
	t.Logf("%d invalid documents refused by the push API; accepted state and Envoy config unchanged", len(files))
}

func roundRobinFor(t *testing.T, bs []*Backend) []byte {
	return policy(t, roundRobin, map[string]any{"Port": reservePort(t), "B": bs})
}
