package lbctl_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives lbctl a state directory of the tests' own: lbctl envoy and lbctl bootstrap keep an Envoy's
// files under $XDG_STATE_HOME by default, not in the home of whoever runs the tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lbctl-test-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
