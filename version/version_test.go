package version

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestOneVersion: the chart's appVersion (its default image tag) and the Makefile's image tag are the release
// in VERSION, so that lbplane_build_info, lbctl version and the running image say the same.
func TestOneVersion(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version) {
		t.Fatalf("VERSION %q is not a semantic version", Version)
	}
	b, err := os.ReadFile(filepath.Join("..", "charts", "lbplane", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != Version {
		t.Errorf("charts/lbplane/Chart.yaml appVersion %q, VERSION %q: set appVersion to the release", chart.AppVersion, Version)
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^VERSION := \$\(shell cat version/VERSION\)$`).Match(mk) {
		t.Error("the Makefile does not take VERSION from version/VERSION")
	}
}

func TestString(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "0123456789abcdef0123"
	if got := String(); got != Version+" (0123456789ab)" {
		t.Errorf("String() = %q", got)
	}
	revision = "0123456789abcdef0123-dirty"
	if got := String(); got != Version+" (0123456789ab-dirty)" {
		t.Errorf("String() = %q", got)
	}
}
