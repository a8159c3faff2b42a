package pushclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// A --server that points at something other than the push API gets an error that says what is there
// instead, not a bare "404 page not found".
func TestWrongServerSaysWhatIsThere(t *testing.T) {
	// lbplane's metrics port, as serve mounts it: /metrics, /healthz, and 404 for everything else.
	metricsMux := http.NewServeMux()
	metricsMux.Handle("GET /metrics", metrics.New(func() map[string]int { return nil }).Handler())
	metricsMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {})
	envoy := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Server", "envoy")
		http.Error(w, "", http.StatusNotFound)
	})
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	for name, tc := range map[string]struct {
		url  string
		want string
	}{
		"metrics port": {serve(t, metricsMux), "that is lbplane's metrics port (18002 by default), not its push API (18001 by default); GET /v1/policies answered \"404 page not found\" (404 Not Found)"},
		"envoy":        {serve(t, envoy), "that is an Envoy (a listener or its stats port), not lbplane's push API"},
		"https":        {strings.Replace(tlsSrv.URL, "https://", "http://", 1), "that server speaks HTTPS: use an https:// --server"},
		"other":        {serve(t, http.NotFoundHandler()), "no lbplane push API is there"},
	} {
		c := &pushclient.Client{BaseURL: tc.url, NoRetry: true}
		_, err := c.List(context.Background())
		var apiErr *pushclient.APIError
		if !errors.As(err, &apiErr) || len(apiErr.Errors) != 1 || !strings.HasPrefix(apiErr.Errors[0], tc.url+": ") || !strings.Contains(apiErr.Errors[0], tc.want) {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
	}
}

func serve(t *testing.T, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}
