package lbplanecmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/manifest"
)

// A share of Envoy's main thread outside (0, 1] is refused before anything starts, naming the flag.
func TestProxyStatsFullShareRefusesNonShares(t *testing.T) {
	for _, v := range []string{"0", "-0.5", "1.5", "NaN"} {
		cmd := newServe()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--data-dir", t.TempDir(), "--proxy-stats-full-share", v})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--proxy-stats-full-share") || !strings.Contains(err.Error(), "at most 1") {
			t.Errorf("--proxy-stats-full-share %s: %v", v, err)
		}
	}
}

// --config-dir's help names every kind of file the directory's loader takes, and no other.
func TestConfigDirHelpNamesTheFilesItLoads(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yml", "c.json", "d.txt", "e.yaml.bak", ".hidden.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := manifest.PolicyFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	help := newServe().Flags().Lookup("config-dir").Usage
	var loaded []string
	for _, f := range files {
		ext := filepath.Ext(f)
		loaded = append(loaded, ext)
		if !strings.Contains(help, "*"+ext) {
			t.Errorf("--config-dir help %q does not name %s, which it loads", help, filepath.Base(f))
		}
	}
	if strings.Join(loaded, " ") != ".yaml .yml .json" {
		t.Errorf("the config directory's files: %v", files)
	}
	for _, ext := range []string{".txt", ".bak"} {
		if strings.Contains(help, ext) {
			t.Errorf("--config-dir help %q names %s, which it does not load", help, ext)
		}
	}
}
