package lbctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/internal/tools"
)

// BadInput is one file of testdata/bad: an invalid policy and the texts its error must contain.
type BadInput struct {
	Path    string
	Expects []string
}

func badInputs(t *testing.T) []BadInput {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "testdata", "bad", "*.yaml"))
	if len(files) < 150 {
		t.Fatalf("only %d bad inputs; regenerate with go run ./hack/genbad", len(files))
	}
	var out []BadInput
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in := BadInput{Path: f}
		for _, line := range strings.Split(string(data), "\n") {
			e, ok := strings.CutPrefix(line, "# expect: ")
			if !ok {
				break
			}
			in.Expects = append(in.Expects, e)
		}
		out = append(out, in)
	}
	return out
}

func TestEveryBadInputIsRefusedByValidate(t *testing.T) {
	for _, in := range badInputs(t) {
		t.Run(filepath.Base(in.Path), func(t *testing.T) {
			code, _, errs := run(t, "", "validate", "--allow-backend-cidrs", "127.0.0.0/8", "-f", in.Path)
			if code == 0 {
				t.Fatalf("accepted")
			}
			for _, e := range in.Expects {
				if !strings.Contains(errs, e) {
					t.Errorf("error lacks %q:\n%.2000s", e, errs)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(errs), "\\n") {
				if !strings.HasPrefix(line, "error: ") {
					t.Errorf("not one error per line: %.300q", line)
				}
			}
		})
	}
}
