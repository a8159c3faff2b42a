package lbctl_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateDiff = flag.Bool("update", false, "rewrite testdata/diff/*/want.txt from lbctl diff's output")

// TestDiffGolden runs lbctl diff --from old.yaml -f new.yaml on each case under testdata/diff and compares
// the output with want.txt (regenerate with -update and review the diff). An unchanged policy prints
// nothing and exits 0; a change prints it and exits 1, as diff(1) does.
func TestDiffGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "diff", "*"))
	if err != nil || len(dirs) < 5 {
		t.Fatalf("cases: %v %v", dirs, err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			code, out, errs := run(t, "", "diff", "--from", filepath.Join(dir, "old.yaml"), "-f", filepath.Join(dir, "new.yaml"))
			if errs != "" {
				t.Fatalf("stderr: %s", errs)
			}
			want := 1
			if filepath.Base(dir) == "unchanged" {
				want = 0
			}
			if code != want {
				t.Errorf("exit %d, want %d\n%s", code, want, out)
			}
			if (out == "") != (want == 0) {
				t.Errorf("output %q with exit %d", out, code)
			}
			golden := filepath.Join(dir, "want.txt")
			if *updateDiff {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != out {
				t.Errorf("output differs from %s (go test ./internal/lbctl -run TestDiffGolden -update):\n%s", golden, out)
			}
		})
	}
}

func TestDiffErrorsExit2(t *testing.T) {
	code, _, errs := run(t, "", "diff", "--from", "testdata/does-not-exist.yaml", "-f", "testdata/diff/unchanged/new.yaml")
	if code != 2 || errs == "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}
