package pushapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
)

// GET .../live answers the read-only token with each Envoy's view and the sum, and nobody else.
func TestLiveShowsEachEnvoyAndTheSum(t *testing.T) {
	t0 := time.Now()
	history := func(node string, requests uint64) proxystats.History {
		sample := func(at time.Time, n uint64) *proxystats.Sample {
			return &proxystats.Sample{At: at, Clusters: map[string]*proxystats.Cluster{
				"default/p/a": {Hosts: []proxystats.Host{{Address: "10.0.0.1:80", Total: n, Weight: 1}}}}}
		}
		return proxystats.History{Group: "default", Node: node, Samples: []*proxystats.Sample{sample(t0, 0), sample(t0.Add(time.Second), requests)}}
	}
	hs := []proxystats.History{history("e1", 30), history("e2", 10)}
	_, url, _ := pushapitest.Start(t, "admin", func(s *pushapi.Server) {
		s.ReadOnlyToken = "reader"
		s.Health = func() proxystats.Health { return proxystats.Summarize(hs, time.Minute) }
		s.HealthByProxy = func() map[string]proxystats.Health {
			return map[string]proxystats.Health{"e1": proxystats.Summarize(hs[:1], time.Minute), "e2": proxystats.Summarize(hs[1:], time.Minute)}
		}
	})
	if _, err := (&pushapi.Client{BaseURL: url, Token: "admin"}).Apply(context.Background(), []byte(doc("p", 10080, "a.example.com")), false); err != nil {
		t.Fatal(err)
	}
	get := func(token string) (*http.Response, pushapi.LiveResult) {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/policies/default/p/live", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l pushapi.LiveResult
		json.NewDecoder(resp.Body).Decode(&l)
		return resp, l
	}
	if resp, _ := get("wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %s", resp.Status)
	}
	resp, l := get("reader")
	if resp.StatusCode != http.StatusOK || len(l.Backends) != 1 || len(l.Proxies) != 2 {
		t.Fatalf("%s: %+v", resp.Status, l)
	}
	if sum := l.Backends[0].PerEndpoint; len(sum) != 1 || sum[0].Requests != 40 || sum[0].RequestsPerSecond != 40 {
		t.Errorf("summed: %+v", sum)
	}
	if e1 := l.Proxies[0]; e1.NodeID != "e1" || e1.Backends[0].PerEndpoint[0].Requests != 30 {
		t.Errorf("per Envoy: %+v", l.Proxies)
	}
}
