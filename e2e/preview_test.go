package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/translate"
)

const previewPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: preview}
spec:
  debugHeaders: true
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: {{.Algorithm}}, hashKeys: [{header: {name: x-user}}]}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// previewKeys is how many distinct hash keys the preview tests route through Envoy, and modelKeys how many the
// model alone hashes. The chain of proof: the model names Envoy's endpoint for at least 99 % of the keys sent
// through Envoy, before and after the change; lbctl diff --traffic's figure is within half a point of the
// share of modelKeys the model moves (its standard error there is under 0.1 point); and the share measured
// through Envoy is within 2.5 points of the preview (about 4 standard errors at 4,000 keys: the statistical
// bound, not a looser claim, as the per-key agreement is what ties model to Envoy).
const (
	previewKeys = 4000
	modelKeys   = 200000
)

// trafficModel translates a policy document offline, as lbctl does, and models one of its policies.
func trafficModel(t *testing.T, doc []byte, name string, down trafficmodel.Down) *trafficmodel.Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.ReadPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The tests' backends are on loopback, as lbplane serve --allow-backend-cidrs allows them in the harness.
	res := translate.Translate(manifest.Policies(docs), translate.Refs{Reach: reach.Loopback})
	m, err := trafficmodel.ForPolicy(res.IR, "default", name, down)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// owners sends one request per key through Envoy, 8 at a time, and returns the endpoint (address:port,
// from x-lbplane-upstream) and the backend name (X-Backend) that answered each. Any failure fails the test.
func owners(t *testing.T, url string, keys []string) (upstream, backend []string) {
	t.Helper()
	upstream, backend = make([]string, len(keys)), make([]string, len(keys))
	c := newClient(true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("x-user", keys[i])
				resp, err := c.HTTP.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("key %s: %v", keys[i], err))
					mu.Unlock()
					continue
				}
				upstream[i], backend[i] = resp.Header.Get("x-lbplane-upstream"), resp.Header.Get("X-Backend")
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d requests failed: %v", len(errs), len(keys), errs[:min(len(errs), 5)])
	}
	return upstream, backend
}

// predictedOwners is the model's owner of each key.
func predictedOwners(t *testing.T, m *trafficmodel.Policy, keys []string) []string {
	t.Helper()
	r := m.Routes[0]
	c := m.Clusters[r.Clusters[0].Name]
	out := make([]string, len(keys))
	for i, k := range keys {
		h, ok, _ := trafficmodel.RequestHash(r.Hash, trafficmodel.Request{Path: "/", Headers: map[string][]string{"x-user": {k}}})
		if !ok {
			t.Fatalf("key %s: the model finds no hash input", k)
		}
		o, _ := c.Owner(h)
		if o < 0 {
			t.Fatalf("key %s: the model finds no owner", k)
		}
		out[i] = c.Hosts[o].Address
	}
	return out
}

func agreementOf(a, b []string) float64 {
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	return float64(same) / float64(len(a))
}

func movedOf(a, b []string) float64 { return 1 - agreementOf(a, b) }

// TestPreviewHashOwnersAndMovedKeysMatchEnvoy: for ring hash and Maglev, the model names the endpoint that
// owns each of 4,000 header keys as the real Envoy routes them, before and after an endpoint is added, and
// lbctl diff --traffic, run before the change, predicts the fraction of keys that then move: within half a
// point of the model over 200,000 keys, and within 2.5 points of what is measured through Envoy.
func TestPreviewHashOwnersAndMovedKeysMatchEnvoy(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "k1", "k2", "k3", "k4", "k5", "k6")
	keys := make([]string, previewKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	for _, algo := range []string{"RingHash", "Maglev"} {
		t.Run(algo, func(t *testing.T) {
			data := map[string]any{"Algorithm": algo, "B": bs[:5]}
			e := setupWith(t, previewPolicy, data, bs[:5]...)
			waitServing(t, e.URL, "k1", "k2", "k3", "k4", "k5")
			waitSynced(t, e.L, 1)
			before := policy(t, previewPolicy, data)

			measured, names := owners(t, e.URL, keys)
			predicted := predictedOwners(t, trafficModel(t, before, "preview", nil), keys)
			if a := agreementOf(predicted, measured); a < 0.99 {
				t.Errorf("the model names Envoy's endpoint for %.2f%% of %d keys; want at least 99%%", 100*a, len(keys))
			}
			t.Logf("%s: the model and Envoy agree on the owner of %.2f%% of %d keys; spread %v", algo, 100*agreementOf(predicted, measured), len(keys), countOf(names))

			// The preview, from the server's current policy, of adding k6.
			data["B"] = bs
			after := policy(t, previewPolicy, data)
			next := filepath.Join(t.TempDir(), "next.yaml")
			if err := os.WriteFile(next, after, 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, err := lbctl(t, e.L, "", "diff", "--traffic", "-f", next, "-o", "json")
			if code := exitCodeOf(err); code != 1 {
				t.Fatalf("lbctl diff --traffic: exit %d (want 1: traffic moves): %v\n%s%s", code, err, out, errOut)
			}
			var pvs []trafficmodel.Preview
			if err := listItems(out, &pvs); err != nil || len(pvs) != 1 || len(pvs[0].Movements) != 1 {
				t.Fatalf("lbctl diff --traffic -o json: %v\n%s", err, out)
			}
			previewMoved := pvs[0].Movements[0].Moved
			text, _, _ := lbctl(t, e.L, "", "diff", "--traffic", "-f", next)
			t.Logf("lbctl diff --traffic -f next.yaml:\n%s", text)

			// push-config --dry-run previews the same, and changes nothing.
			dry := lbctlOK(t, e.L, "push-config", "--dry-run", "-f", next)
			if !strings.Contains(dry, "(dry run)") || !strings.Contains(dry, "hash keys that move to another endpoint") {
				t.Errorf("push-config --dry-run shows no traffic preview:\n%s", dry)
			}
			if _, b := owners(t, e.URL, keys[:200]); countOf(b)["k6"] > 0 {
				t.Fatalf("k6 serves after a dry run")
			}

			push(t, e.L, after)
			eventually(t, 20*time.Second, "k6 serves its keys", func() error {
				_, b := owners(t, e.URL, keys[:200])
				if countOf(b)["k6"] == 0 {
					return fmt.Errorf("k6 got none of 200 keys: %v", countOf(b))
				}
				return nil
			})
			measuredAfter, _ := owners(t, e.URL, keys)
			measuredMoved := movedOf(measured, measuredAfter)
			if d := previewMoved - measuredMoved; d > 0.025 || d < -0.025 {
				t.Errorf("lbctl diff --traffic predicted %.2f%% of keys move; %.2f%% of %d moved through Envoy", 100*previewMoved, 100*measuredMoved, len(keys))
			}
			modelAfter := trafficModel(t, after, "preview", nil)
			predictedAfter := predictedOwners(t, modelAfter, keys)
			if a := agreementOf(predictedAfter, measuredAfter); a < 0.99 {
				t.Errorf("after adding k6 the model names Envoy's endpoint for %.2f%% of keys; want at least 99%%", 100*a)
			}
			many := make([]string, modelKeys)
			for i := range many {
				many[i] = fmt.Sprintf("model-user-%d", i)
			}
			modelMoved := movedOf(predictedOwners(t, trafficModel(t, before, "preview", nil), many), predictedOwners(t, modelAfter, many))
			if d := previewMoved - modelMoved; d > 0.005 || d < -0.005 {
				t.Errorf("lbctl diff --traffic predicted %.2f%% of keys move; the model moves %.2f%% of %d keys", 100*previewMoved, 100*modelMoved, len(many))
			}
			t.Logf("%s: predicted %.2f%% of keys move, the model moves %.2f%% of %d, measured %.2f%% of %d; owners after agree on %.2f%%",
				algo, 100*previewMoved, 100*modelMoved, len(many), 100*measuredMoved, len(keys), 100*agreementOf(predictedAfter, measuredAfter))
		})
	}
}

func countOf(names []string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[n]++
	}
	return out
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(interface{ ExitCode() int }); ok {
		return e.ExitCode()
	}
	return -1
}

// TestPreviewSessionsThatMove: lbctl diff --traffic says what share of established sessions an endpoint's
// removal sends elsewhere; 100 clients with session cookies then measure it through Envoy.
func TestPreviewSessionsThatMove(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "s1", "s2", "s3", "s4", "s5")
	data := map[string]any{"B": bs}
	e := setupWith(t, sessionPolicy, data, bs...)
	waitServing(t, e.URL, "s1", "s2", "s3", "s4", "s5")
	waitSynced(t, e.L, 1)
	clients := make([]*Client, 100)
	pinned := make([]string, len(clients))
	for i := range clients {
		clients[i] = jarClient()
		b, err := requestVia(clients[i], e.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		pinned[i] = b
	}

	data["B"] = bs[:4] // s5 leaves
	next := filepath.Join(t.TempDir(), "next.yaml")
	if err := os.WriteFile(next, policy(t, sessionPolicy, data), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := lbctl(t, e.L, "", "diff", "--traffic", "-f", next, "-o", "json")
	var pvs []trafficmodel.Preview
	if jerr := listItems(out, &pvs); jerr != nil || len(pvs) != 1 || len(pvs[0].Movements) != 1 || pvs[0].Movements[0].Kind != "sessions" {
		t.Fatalf("lbctl diff --traffic: %v %v\n%s%s", err, jerr, out, errOut)
	}
	predicted := pvs[0].Movements[0].Moved

	push(t, e.L, policy(t, sessionPolicy, data))
	eventually(t, 20*time.Second, "s5 gets no new clients", func() error {
		for i := 0; i < 10; i++ {
			if b, _ := requestVia(newClient(false), e.URL, nil); b == "s5" {
				return fmt.Errorf("s5 still serves")
			}
		}
		return nil
	})
	moved := 0
	for i, c := range clients {
		b, err := requestVia(c, e.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b != pinned[i] {
			moved++
		}
	}
	measured := float64(moved) / float64(len(clients))
	if d := predicted - measured; d > 0.01 || d < -0.01 {
		t.Errorf("lbctl diff --traffic predicted %.1f%% of sessions move; %d of %d clients moved (%v)", 100*predicted, moved, len(clients), countOf(pinned))
	}
	t.Logf("predicted %.1f%% of sessions move, measured %.1f%% of %d clients", 100*predicted, 100*measured, len(clients))
}
