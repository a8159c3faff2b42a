package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// reloadCounters returns Envoy's config_reload counters of route tables (rds) and scopes (scoped_rds) by
// stat name.
func reloadCounters(t *testing.T, e *Envoy) map[string]int {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/stats?filter=config_reload$")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok || !(strings.Contains(name, ".rds.") || strings.Contains(name, ".scoped_rds.")) {
			continue
		}
		n, _ := strconv.Atoi(value)
		out[name] = n
	}
	return out
}

// More hosts on one port than ir.ScopedRoutesAbove: each host is served from its own scope and route table.
// Every host answers (with or without the port in Host), an unknown host gets 404 (a catch-all host that
// answers 404 needs no scope of its own), and changing one policy's route makes Envoy reload that host's
// route table alone (its rds counters), after which the host is routed to its new backend; for delta and
// state-of-the-world xDS.
func TestManyHostsOnOnePortServedAsScopedRoutes(t *testing.T) {
	t.Parallel()
	for _, delta := range []bool{true, false} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			const hosts = ir.ScopedRoutesAbove + 20
			l := startLbplane(t)
			b := startBackends(t, "old", "new")
			port := reservePort(t)
			doc := func(i int, backend string, bport int) string {
				return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: host-%03d}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [h%03d.scoped.test]}
  backends:
    - name: %s
      endpoints: [{address: 127.0.0.1, port: %d}]
`, i, port, i, backend, bport)
			}
			// The catch-all host answering 404 (what a Gateway listener without a host name has) needs no
			// scope: the port is still served as scoped routes, and a host without one still gets 404.
			docs := []string{fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: any-host}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}
  routes: [{name: none, directResponse: {status: 404}}]
`, port)}
			for i := range hosts {
				docs = append(docs, doc(i, "old", b[0].Port))
			}
			push(t, l, []byte(strings.Join(docs, "---\n")))
			e := startEnvoy(t, l, "scoped", delta)
			waitSynced(t, l, 1)
			base := fmt.Sprintf("http://127.0.0.1:%d/", port)
			c := newClient(true)
			for i := range hosts {
				got, err := requestVia(c, base, map[string]string{"Host": fmt.Sprintf("h%03d.scoped.test", i)})
				if err != nil || got != "old" {
					t.Fatalf("host h%03d: answered by %q, %v", i, got, err)
				}
			}
			if got, err := requestVia(c, base, map[string]string{"Host": fmt.Sprintf("h007.scoped.test:%d", port)}); err != nil || got != "old" {
				t.Fatalf("host with its port: answered by %q, %v", got, err)
			}
			if _, code, err := doWith(c, base, map[string]string{"Host": "unknown.scoped.test"}); err != nil || code != 404 {
				t.Fatalf("unknown host: status %d, %v; want 404", code, err)
			}
			// The one difference from a single route table, documented in docs/policy-reference.md: a scope key
			// is compared as it is, so a Host in another case finds no scope (a virtual host's domains are
			// matched without case).
			if _, code, err := doWith(c, base, map[string]string{"Host": "H007.Scoped.Test"}); err != nil || code != 404 {
				t.Fatalf("upper-case host: status %d, %v; the docs say 404 (update them if this changed)", code, err)
			}
			dump := e.ConfigDump(t)
			if !strings.Contains(dump, "ScopedRoutesConfigDump") || !strings.Contains(dump, "h007.scoped.test") {
				t.Fatalf("Envoy has no scopes for the hosts; config dump:\n%.2000s", dump)
			}

			before := reloadCounters(t, e)
			var tables int
			for name := range before {
				if strings.Contains(name, ".rds.") {
					tables++
				}
			}
			if tables < hosts {
				t.Fatalf("Envoy counts reloads of %d route tables, want one per host (%d): %v", tables, hosts, before)
			}
			// A new backend name: a new cluster, and the host's route now points at it.
			push(t, l, []byte(doc(7, "new", b[1].Port)))
			eventually(t, 30*time.Second, "h007 is routed to the new backend", func() error {
				got, err := requestVia(c, base, map[string]string{"Host": "h007.scoped.test"})
				if err == nil && got != "new" {
					err = fmt.Errorf("answered by %q", got)
				}
				return err
			})
			waitSynced(t, l, 1)
			if got, err := requestVia(c, base, map[string]string{"Host": "h008.scoped.test"}); err != nil || got != "old" {
				t.Fatalf("host h008 after h007 changed: answered by %q, %v", got, err)
			}
			after := reloadCounters(t, e)
			var changed []string
			for name, n := range after {
				if n != before[name] {
					changed = append(changed, fmt.Sprintf("%s %d->%d", name, before[name], n))
				}
			}
			if len(changed) != 1 || !strings.Contains(changed[0], "host-007") || !strings.Contains(changed[0], ".rds.") {
				t.Fatalf("one policy's change reloaded %v; want that host's route table alone", changed)
			}
			t.Logf("reloaded: %v", changed)
		})
	}
}
