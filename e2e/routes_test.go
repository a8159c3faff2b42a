package e2e

import (
	"testing"
)

const routesPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: routes}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP, hostnames: [app.example.com]}
  routes:
    - name: canary-header
      match: {headers: [{name: x-canary, value: "true"}]}
      backends: [{name: canary}]
    - name: exact
      match: {path: {type: Exact, value: /exact}}
      backends: [{name: canary}]
    - name: split
      match: {path: {type: Prefix, value: /api/}}
      backends: [{name: stable, weight: 90}, {name: canary, weight: 10}]
    - name: rest
      backends: [{name: stable}]
  backends:
    - name: stable
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
    - name: canary
      endpoints: [{address: 127.0.0.1, port: {{(index .B 1).Port}}}]
`

func TestRoutesSplitAndMatch(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "stable", "canary")
	e := setup(t, true, routesPolicy, bs...)
	host := map[string]string{"Host": "app.example.com"}
	c := newClient(true)
	eventually(t, 30e9, "the route table is served", func() error {
		_, err := requestVia(c, e.URL+"/", host)
		return err
	})

	split := c.Spread(t, e.URL+"/api/items", 3000, host)
	canaryShare := float64(split["canary"]) / 3000
	if canaryShare < 0.07 || canaryShare > 0.13 {
		t.Errorf("canary got %.1f%% of /api/ traffic, want 10%% ±3", canaryShare*100)
	}
	t.Logf("90/10 split over 3000 requests: %v", split)

	for _, tc := range []struct {
		name, path string
		header     map[string]string
		want       string
	}{
		{"prefix fallthrough", "/other", nil, "stable"},
		{"exact path", "/exact", nil, "canary"},
		{"exact path does not match a longer path", "/exact/more", nil, "stable"},
		{"header match", "/other", map[string]string{"x-canary": "true"}, "canary"},
		{"header value must match", "/other", map[string]string{"x-canary": "false"}, "stable"},
		{"header beats the split route", "/api/x", map[string]string{"x-canary": "true"}, "canary"},
		{"host with a port", "/other", map[string]string{"Host": "app.example.com:1234"}, "stable"},
	} {
		h := map[string]string{"Host": "app.example.com"}
		for k, v := range tc.header {
			h[k] = v
		}
		got := c.Spread(t, e.URL+tc.path, 20, h)
		if got[tc.want] != 20 {
			t.Errorf("%s: %s went to %v, want all to %s", tc.name, tc.path, got, tc.want)
		}
	}
	// An unknown host matches no virtual host: Envoy answers 404 and no backend sees it.
	before := bs[0].Served.Load() + bs[1].Served.Load()
	b, code, err := doWith(c, e.URL+"/", map[string]string{"Host": "other.example.com"})
	if err != nil || code != 404 || b != "" {
		t.Errorf("unknown host: backend %q status %d err %v, want 404 from Envoy", b, code, err)
	}
	if after := bs[0].Served.Load() + bs[1].Served.Load(); after != before {
		t.Errorf("a backend saw the request for an unknown host")
	}
}
