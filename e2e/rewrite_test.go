package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const rewritePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: rewrites}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: headers
      match: {path: {type: SegmentPrefix, value: /headers}}
      responseHeaders:
        set: [{name: X-Header-Set, value: set-by-lbplane}, {name: x-header-new, value: new}]
        add: [{name: X-HEADER-ADD, value: added}]
        remove: [x-header-remove]
      backends: [{name: echo}]
    - name: host
      match: {path: {type: SegmentPrefix, value: /host}}
      rewrite: {hostname: rewritten.example.com}
      backends: [{name: echo}]
    - name: full
      match: {path: {type: SegmentPrefix, value: /full/one}}
      rewrite: {hostname: full.example.com, path: {type: ReplaceFullPath, value: /one}}
      backends: [{name: echo}]
    - name: prefix
      match: {path: {type: SegmentPrefix, value: /prefix/one}}
      rewrite: {path: {type: ReplacePrefixMatch, value: /one}}
      backends: [{name: echo}]
    - name: trailing-slashes
      match: {path: {type: SegmentPrefix, value: /trail/}}
      rewrite: {path: {type: ReplacePrefixMatch, value: /xyz/}}
      backends: [{name: echo}]
    - name: strip
      match: {path: {type: SegmentPrefix, value: /strip-prefix}}
      rewrite: {path: {type: ReplacePrefixMatch, value: /}}
      backends: [{name: echo}]
    - name: string-prefix
      match: {path: {type: Prefix, value: /static-}}
      rewrite: {path: {type: ReplacePrefixMatch, value: /assets/}}
      backends: [{name: echo}]
    - name: moved
      match: {path: {type: SegmentPrefix, value: /moved}}
      redirect: {hostname: example.org, path: {type: ReplacePrefixMatch, value: /}}
      responseHeaders: {set: [{name: X-Header-Set, value: on-redirect}]}
    - name: maintenance
      match: {path: {type: Exact, value: /maintenance}}
      directResponse: {status: 503}
      responseHeaders: {set: [{name: Retry-After, value: "60"}]}
    - name: rest
      match: {path: {type: SegmentPrefix, value: /}}
      rewrite: {hostname: root.internal, path: {type: ReplacePrefixMatch, value: /site}}
      backends: [{name: echo}]
  backends:
    - name: echo
      endpoints: [{address: 127.0.0.1, port: {{.Echo}}}]
`

// TestRewritesAndResponseHeaders: through a real Envoy, the backend sees the Host and path a route's rewrite
// gives the request, the query kept, with Gateway API's rules for a replaced prefix (whole segments, trailing
// slashes ignored, "/" strips it, the match "/" keeps the path after the replacement); the client sees the
// response headers a route sets, adds and removes, on the backend's answers and on Envoy's own.
func TestRewritesAndResponseHeaders(t *testing.T) {
	t.Parallel()
	port, lis := listenReserved(t)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Backend", "echo")
		h.Set("X-Seen-Host", r.Host)
		h.Set("X-Seen-Uri", r.RequestURI)
		h.Set("X-Header-Set", "backend")
		h.Set("X-Header-Add", "backend")
		h.Set("X-Header-Remove", "backend")
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	e := setupWith(t, rewritePolicy, map[string]any{"Echo": port})
	waitServing(t, e.URL+"/headers", "echo")

	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.URL+path, nil)
		req.Host = "app.example.com"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		return resp
	}

	t.Run("path and host name seen by the backend", func(t *testing.T) {
		for _, tc := range []struct{ path, uri, host string }{
			{"/host/x?q=1", "/host/x?q=1", "rewritten.example.com"},
			{"/full/one/two?q=1&r", "/one?q=1&r", "full.example.com"},
			{"/full/one", "/one", "full.example.com"},
			{"/prefix/one/two?a=b", "/one/two?a=b", "app.example.com"},
			{"/prefix/one", "/one", "app.example.com"},
			{"/prefix/one/", "/one/", "app.example.com"},
			{"/prefix/one/a%20b", "/one/a%20b", "app.example.com"},
			// Not the segment /prefix/one: the last route's.
			{"/prefix/onetwo", "/site/prefix/onetwo", "root.internal"},
			{"/trail/bar", "/xyz/bar", "app.example.com"},
			{"/trail", "/xyz", "app.example.com"},
			{"/trail/", "/xyz/", "app.example.com"},
			{"/strip-prefix/three", "/three", "app.example.com"},
			{"/strip-prefix", "/", "app.example.com"},
			{"/strip-prefix/", "/", "app.example.com"},
			{"/strip-prefix?x=1", "/?x=1", "app.example.com"},
			{"/static-logo.png?v=2", "/assets/logo.png?v=2", "app.example.com"},
			{"/", "/site/", "root.internal"},
			{"/anything/else?z=9", "/site/anything/else?z=9", "root.internal"},
		} {
			resp := get(t, tc.path)
			if resp.StatusCode != 200 || resp.Header.Get("X-Seen-Uri") != tc.uri || resp.Header.Get("X-Seen-Host") != tc.host {
				t.Errorf("%s: %d, the backend saw %s for Host %s; want %s for %s", tc.path, resp.StatusCode,
					resp.Header.Get("X-Seen-Uri"), resp.Header.Get("X-Seen-Host"), tc.uri, tc.host)
			}
		}
	})

	t.Run("response headers seen by the client", func(t *testing.T) {
		resp := get(t, "/headers/x")
		h := resp.Header
		if got := h.Values("X-Header-Set"); len(got) != 1 || got[0] != "set-by-lbplane" {
			t.Errorf("X-Header-Set %q, want the backend's value replaced by set-by-lbplane", got)
		}
		if got := h.Get("X-Header-New"); got != "new" {
			t.Errorf("X-Header-New %q, want new", got)
		}
		if got := strings.Join(h.Values("X-Header-Add"), ","); got != "backend,added" {
			t.Errorf("X-Header-Add %q, want backend,added", got)
		}
		if got := h.Values("X-Header-Remove"); len(got) != 0 {
			t.Errorf("X-Header-Remove %q, want it removed", got)
		}
		// Another route's answers are left alone.
		if got := get(t, "/host").Header.Get("X-Header-Remove"); got != "backend" {
			t.Errorf("X-Header-Remove on another route: %q, want the backend's", got)
		}
	})

	t.Run("response headers on Envoy's own answers", func(t *testing.T) {
		resp := get(t, "/moved/a?b=1")
		if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != "http://example.org/a?b=1" || resp.Header.Get("X-Header-Set") != "on-redirect" {
			t.Errorf("redirect: %d Location %q X-Header-Set %q; want 302, http://example.org/a?b=1, on-redirect", resp.StatusCode, loc, resp.Header.Get("X-Header-Set"))
		}
		resp = get(t, "/maintenance")
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "60" {
			t.Errorf("direct response: %d Retry-After %q; want 503 with 60", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	})

	// The explain of the built routes names the Envoy fields the rewrites became.
	out, errOut, err := lbctl(t, e.L, "", "explain", "rewrites")
	if err != nil {
		t.Fatalf("lbctl explain: %v\n%s", err, errOut)
	}
	for _, want := range []string{"routes[name=default/rewrites/full].route.regex_rewrite", "routes[name=default/rewrites/rest].route.prefix_rewrite",
		"routes[name=default/rewrites/host].route.host_rewrite_literal", "routes[name=default/rewrites/maintenance].response_headers_to_add"} {
		if !strings.Contains(out, want) {
			t.Errorf("lbctl explain rewrites does not name %s:\n%s", want, out)
		}
	}
}
