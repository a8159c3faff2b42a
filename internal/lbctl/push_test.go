package lbctl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/pushclient"
)

func namedPolicy(name string, port int) string {
	return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s}
spec:
  listener: {port: %d, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 9001}]}]
`, name, port)
}

// -f repeats, and every file is pushed, in one all-or-nothing push (only the last one was, silently).
func TestPushConfigRepeatedFilesPushesEveryOne(t *testing.T) {
	url := apiServer(t)
	c := &pushclient.Client{BaseURL: url, Token: "admin"}
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a.yaml", namedPolicy("a", 10001)), write("b.yaml", namedPolicy("b", 10002))
	bad := write("bad.yaml", "apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: bad}\nspec: {listener: {port: 0}}\n")
	names := func() []string {
		t.Helper()
		ps, err := c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	server := []string{"--server", url, "--token", "admin"}

	// A broken file among them: nothing is pushed, and the error names the file.
	code, _, errs := run(t, "", append(server, "push-config", "-f", a, "-f", bad)...)
	if code == 0 || !strings.Contains(errs, "bad.yaml") {
		t.Errorf("a push with a broken second file: exit %d, %q", code, errs)
	}
	if got := names(); len(got) != 0 {
		t.Errorf("after the refused push: %v stored, want none", got)
	}

	code, out, errs := run(t, namedPolicy("c", 10003), append(server, "push-config", "-f", a, "-f", b, "-f", "-")...)
	if code != 0 {
		t.Fatalf("push-config -f a -f b -f -: exit %d: %s", code, errs)
	}
	for _, n := range []string{"default/a created", "default/b created", "default/c created"} {
		if !strings.Contains(out, n) {
			t.Errorf("output %q does not say %q", out, n)
		}
	}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("stored %v, want a, b and c", got)
	}
	if code, _, errs := run(t, "", append(server, "apply", "-f", "-", "-f", "-")...); code == 0 || !strings.Contains(errs, "standard input can be read once") {
		t.Errorf("-f - twice: exit %d, %q", code, errs)
	}
}
