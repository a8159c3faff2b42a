package lbctl_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/internal/lbctl"
	"github.com/lbplane/lbplane/internal/tools"
)

// syncBuffer is a strings.Builder the command writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// get --watch prints the list, then again when a policy is added (the header once), and ends after
// --watch-max answers.
func TestGetWatchPrintsChanges(t *testing.T) {
	url := apiServer(t)
	t.Chdir(tools.RepoRoot())
	c := &pushclient.Client{BaseURL: url, Token: "admin"}
	if _, err := c.Apply(context.Background(), []byte(shopPolicy), false); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- lbctl.Main([]string{"--server", url, "--token", "admin", "get", "-A", "--watch", "--interval", "100ms",
			"--watch-max", "2", "--watch-timeout", "60s"}, strings.NewReader(""), &out, &errb)
	}()
	waitFor(t, "the first answer", func() bool { return strings.Contains(out.String(), "cart") })
	if _, err := c.Apply(context.Background(), []byte(strings.ReplaceAll(shopPolicy, "cart", "basket")), false); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("get --watch --watch-max 2 did not end")
	}
	got := out.String()
	if strings.Count(got, "NAMESPACE") != 1 || strings.Count(got, "cart") != 2 || strings.Count(got, "basket") != 1 {
		t.Errorf("want the header once, then cart, then cart and basket:\n%s", got)
	}
}

// A watch over an answer that does not change prints it once and ends at --watch-timeout.
func TestStatusWatchEndsAtItsTimeout(t *testing.T) {
	url := apiServer(t)
	t.Chdir(tools.RepoRoot())
	if code, _, errs := run(t, "", "--server", url, "--token", "admin", "apply", "-f", "examples/round-robin.yaml"); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := run(t, "", "--server", url, "--token", "admin", "status", "demo", "-o", "json", "--watch", "--interval", "100ms", "--watch-timeout", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Count(out, `"conditions"`) != 1 {
		t.Errorf("an unchanged status printed %d times:\n%s", strings.Count(out, `"conditions"`), out)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Shell completion of policy names asks the server: cobra's __complete is what the shell scripts call.
func TestCompletionOfPolicyNamesAsksTheServer(t *testing.T) {
	url := apiServer(t)
	t.Chdir(tools.RepoRoot())
	c := &pushclient.Client{BaseURL: url, Token: "admin"}
	for _, name := range []string{"cart", "carrot", "basket"} {
		if _, err := c.Apply(context.Background(), []byte(strings.ReplaceAll(shopPolicy, "cart", name)), false); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"get", "status", "explain", "delete", "trace", "whatif"} {
		code, out, errs := run(t, "", "--server", url, "--token", "admin", "__complete", cmd, "-n", "shop", "car")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, code, errs)
		}
		if got := strings.Fields(out); strings.Join(got, " ") != "carrot cart :4" {
			t.Errorf("%s: completions %q, want carrot, cart and the no-file directive", cmd, out)
		}
	}
	// trace and whatif model a -f file offline: its names, not the server's.
	for _, cmd := range []string{"trace", "whatif"} {
		if _, out, _ := run(t, "", "__complete", cmd, "-f", "examples/hash-path-and-host.yaml", "hash-"); strings.Join(strings.Fields(out), " ") != "hash-path hash-host :4" {
			t.Errorf("%s -f: completions %q, want the file's hash-path and hash-host", cmd, out)
		}
	}
	// Another namespace has none of them.
	if _, out, _ := run(t, "", "--server", url, "--token", "admin", "__complete", "get", "car"); strings.Contains(out, "cart") {
		t.Errorf("completed names of namespace shop in default: %q", out)
	}
	// -o completes with the formats.
	if _, out, _ := run(t, "", "__complete", "get", "-o", ""); !strings.Contains(out, "wide\n") || !strings.Contains(out, "jsonpath=\n") {
		t.Errorf("-o completions: %q", out)
	}
}
