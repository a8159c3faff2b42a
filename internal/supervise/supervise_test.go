package supervise

import (
	"os/exec"
	"testing"
)

// TestRunReturnsTheChildsStatus: an exit code as it is, a signal as 128+signal, as a shell reports them.
func TestRunReturnsTheChildsStatus(t *testing.T) {
	for script, want := range map[string]int{
		"exit 0":        0,
		"exit 7":        7,
		"kill -TERM $$": 143,
		"kill -KILL $$": 137,
	} {
		var pid int
		code, err := Run(exec.Command("sh", "-c", script), func(p int) { pid = p })
		if err != nil || code != want {
			t.Errorf("%s: status %d (%v), want %d", script, code, err, want)
		}
		if pid <= 0 {
			t.Errorf("%s: started was not called with the child's pid", script)
		}
	}
	if _, err := Run(exec.Command("/nonexistent/envoy"), nil); err == nil {
		t.Error("a child that cannot start: no error")
	}
}
