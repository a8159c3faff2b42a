package grpcfleet

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/tools"
)

// A fleet that cannot start says why in its one line, and Start returns that, with the process ended.
func TestStartReturnsTheFleetsError(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleet")
	build := exec.Command("go", "build", "-o", bin, "./internal/grpcfleet/fleet")
	build.Dir = tools.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the fleet: %v\n%s", err, out)
	}
	for args, want := range map[string]string{
		"": "the gRPC fleet: -api, -xds, -target and -dir are required",
		"-api x -xds y -target z -dir . -parallel 0": "the gRPC fleet: -parallel: at least 1, got 0",
	} {
		cmd := exec.Command(bin, strings.Fields(args)...)
		p, err := Start(cmd)
		if err == nil {
			p.Close(10 * time.Second)
			t.Fatalf("fleet %s started", args)
		}
		if err.Error() != want {
			t.Errorf("fleet %s: %v, want %s", args, err, want)
		}
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("fleet %s: not ended with status 1: %v", args, cmd.ProcessState)
		}
	}
}
