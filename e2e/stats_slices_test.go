package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/proxystats"
)

// statsPolicy is one policy with one actively checked endpoint; Timeout, when given, is its connect timeout
// in seconds.
const statsPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
{{- with .Timeout}}
      connectTimeout: {{.}}s
{{- end}}
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /healthz}}
      endpoints: [{address: 127.0.0.1, port: {{.B.Port}}}]
`

// lbplane reads an Envoy's /clusters in slices of the group's clusters (--proxy-stats-slice), so that no
// read holds Envoy's main thread, which also applies config, for long. Read one cluster at a time from a
// real Envoy, every policy's endpoint health is still in its status, and a stopped backend shows on its own
// policy alone.
func TestStatsReadInSlicesCoverEveryPolicy(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--proxy-stats-slice", "1", "--proxy-stats-interval", "500ms")
	bs := startBackends(t, "s1", "s2", "s3")
	startEnvoy(t, l, "sliced", true)
	names := []string{"sa", "sb", "sc"}
	for i, name := range names {
		port := reservePort(t)
		push(t, l, policy(t, statsPolicy, map[string]any{"Name": name, "Port": port, "B": bs[i]}))
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), bs[i].Name)
	}
	healthy := func(name string, want int32) func() error {
		return func() error {
			b, err := backendStatus(t, l, name, "app")
			if err != nil {
				return err
			}
			if b.Endpoints.Total != 1 || b.Endpoints.Healthy != want || b.Proxies != 1 {
				return fmt.Errorf("%s: %+v", name, b)
			}
			return nil
		}
	}
	for _, name := range names {
		eventually(t, 15*time.Second, name+"'s endpoint healthy in status", healthy(name, 1))
	}
	bs[1].Stop()
	eventually(t, 15*time.Second, "sb's stopped endpoint shown as failing its check", func() error {
		b, err := backendStatus(t, l, "sb", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Healthy != 0 || !slices.Contains(ejectedReasons(b, fmt.Sprintf("127.0.0.1:%d", bs[1].Port)), "active health check failed") {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})
	for _, name := range []string{"sa", "sc"} {
		if err := healthy(name, 1)(); err != nil {
			t.Errorf("another policy's status moved: %v", err)
		}
	}
}

// Between full reads (kept to --proxy-stats-full-share of Envoy's main thread; here so small a share that
// they come 40 s to two minutes apart, the most they get), lbplane reads only the busy clusters of a real
// Envoy with more than proxystats.DefaultMinPartialClusters clusters: those just changed, with requests
// moving or an endpoint out. Status stays right: a changed policy's requests, and a busy policy's failing
// endpoint show within seconds, an idle policy's failure at the latest at the next full read, and latency
// (read in full reads only) comes too.
func TestStatsBetweenFullReadsFollowBusyClusters(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--proxy-stats-full-share", "0.001", "--proxy-stats-interval", "500ms")
	bs := startBackends(t, "p1", "p2", "p3", "filler")
	startEnvoy(t, l, "partial", true)
	fillerPort := reservePort(t)
	var fillers strings.Builder
	for i := range proxystats.DefaultMinPartialClusters + 44 {
		fmt.Fprintf(&fillers, "---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: filler-%d}\nspec:\n"+
			"  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [filler-%d.e2e.local]}\n"+
			"  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: %d}]}]\n", i, fillerPort, i, bs[3].Port)
	}
	push(t, l, []byte(fillers.String()))
	names := []string{"pa", "pb", "pc"}
	ports := make([]int, len(names))
	apply := func(i, timeout int) {
		push(t, l, policy(t, statsPolicy, map[string]any{"Name": names[i], "Port": ports[i], "B": bs[i], "Timeout": timeout}))
	}
	for i := range names {
		ports[i] = reservePort(t)
		apply(i, 1)
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[i]), bs[i].Name)
	}
	healthy := func(name string) error {
		b, err := backendStatus(t, l, name, "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Total != 1 || b.Endpoints.Healthy != 1 || b.Proxies != 1 {
			return fmt.Errorf("%s: %+v", name, b)
		}
		return nil
	}
	for _, name := range names {
		eventually(t, 15*time.Second, name+"'s endpoint healthy in status", func() error { return healthy(name) })
	}
	failing := func(i int) func() error {
		return func() error {
			b, err := backendStatus(t, l, names[i], "app")
			if err != nil {
				return err
			}
			if b.Endpoints.Healthy != 0 || !slices.Contains(ejectedReasons(b, fmt.Sprintf("127.0.0.1:%d", bs[i].Port)), "active health check failed") {
				return fmt.Errorf("%s: %+v", names[i], b)
			}
			return nil
		}
	}

	// pa changes, then takes 30 requests: they show in its status within seconds.
	before, err := backendStatus(t, l, "pa", "app")
	if err != nil {
		t.Fatal(err)
	}
	apply(0, 2)
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[0]), bs[0].Name)
	hit := func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[0]))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("pa: %s", resp.Status)
		}
		return nil
	}
	for i := range 30 {
		if err := hit(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	eventually(t, 10*time.Second, "pa's 30 requests in its status", func() error {
		b, err := backendStatus(t, l, "pa", "app")
		if err != nil {
			return err
		}
		if b.Requests < before.Requests+30 {
			return fmt.Errorf("requests %d, want at least %d", b.Requests, before.Requests+30)
		}
		return nil
	})

	// pb changes and takes a request every 200 ms (at most for two minutes), then its backend stops: shown
	// failing its check within seconds.
	apply(1, 2)
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[1]), bs[1].Name)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: time.Second}
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", ports[1])); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	eventually(t, 10*time.Second, "pb's requests in its status", func() error {
		b, err := backendStatus(t, l, "pb", "app")
		if err != nil {
			return err
		}
		if b.Requests < 5 {
			return fmt.Errorf("requests %d, want at least 5", b.Requests)
		}
		return nil
	})
	bs[1].Stop()
	eventually(t, 15*time.Second, "pb's stopped endpoint shown as failing its check", failing(1))

	// pc, idle, loses its backend: the next full read (at most two minutes away) shows it, and pa's
	// latency, which only full reads carry (pa takes a request now and then meanwhile).
	bs[2].Stop()
	eventually(t, 150*time.Second, "pc's stopped endpoint shown as failing its check", failing(2))
	checks := 0
	eventually(t, 150*time.Second, "pa's p99 latency from a full read", func() error {
		if checks++; checks%20 == 1 { // about one request a second
			if err := hit(); err != nil {
				return err
			}
		}
		b, err := backendStatus(t, l, "pa", "app")
		if err != nil {
			return err
		}
		if b.LatencyP99Ms == nil {
			return fmt.Errorf("no p99: %+v", b)
		}
		return nil
	})
	if err := healthy("pa"); err != nil {
		t.Errorf("pa's status moved: %v", err)
	}
}
