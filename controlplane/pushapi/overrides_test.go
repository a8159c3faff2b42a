package pushapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/store"
)

const overridesDoc = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: web}
spec:
  listener: {port: 10090, protocol: HTTP}
  backends:
    - name: app
      endpoints:
        - {address: 198.51.100.1, port: 80}
        - {address: 198.51.100.2, port: 80}
        - {address: 198.51.100.3, port: 80, state: Draining}
`

// servedAddrs lists the endpoints of web's backend app as the engine serves them, with the health status
// Envoy is sent.
func servedAddrs(t *testing.T, s *pushapi.Server) []string {
	t.Helper()
	m := s.Engine.Resource("default", resource.EndpointType, "default/web/app").(*endpointv3.ClusterLoadAssignment)
	var out []string
	for _, l := range m.Endpoints {
		for _, e := range l.LbEndpoints {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()+" "+e.HealthStatus.String())
		}
	}
	return out
}

// Drain and maintenance through the push API: only the admin token may, the endpoint must be the policy's,
// each change reaches the built endpoints, a push of the policy leaves it in force, a server started again
// on the store serves it, ready undoes it (but not the spec's own drain), and deleting the policy forgets it.
func TestEndpointStateThroughThePushAPI(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, url, _ := pushapitest.StartOn(t, st, "admin", func(s *pushapi.Server) { s.ReadOnlyToken = "reader" })
	ctx := context.Background()
	admin := &pushapi.Client{BaseURL: url, Token: "admin"}
	reader := &pushapi.Client{BaseURL: url, Token: "reader"}
	if _, err := admin.Apply(ctx, []byte(overridesDoc), false); err != nil {
		t.Fatal(err)
	}
	if got, want := servedAddrs(t, s), []string{"198.51.100.1 UNKNOWN", "198.51.100.2 UNKNOWN", "198.51.100.3 DRAINING"}; !slices.Equal(got, want) {
		t.Fatalf("before: %v, want %v", got, want)
	}
	drain := apiwire.EndpointStateRequest{Endpoint: "198.51.100.1:80", State: "Draining"}
	if _, err := reader.SetEndpointState(ctx, "default", "web", drain); apiErr(t, err).Status != http.StatusForbidden {
		t.Fatalf("the read-only token drained an endpoint: %v", err)
	}
	for _, c := range []struct {
		req  apiwire.EndpointStateRequest
		code int
		msg  string
	}{
		{apiwire.EndpointStateRequest{Endpoint: "198.51.100.9:80", State: "Draining"}, http.StatusNotFound, "endpoint: policy default/web has no endpoint 198.51.100.9:80"},
		{apiwire.EndpointStateRequest{Endpoint: "198.51.100.1:80", State: "Off"}, http.StatusBadRequest, `state: unsupported value "Off"; supported: Draining, Maintenance, Ready`},
		{apiwire.EndpointStateRequest{Endpoint: "198.51.100.1:99999", State: "Draining"}, http.StatusBadRequest, `endpoint: port "99999" is not a number from 1 to 65535`},
		{apiwire.EndpointStateRequest{Endpoint: "198.51.100.1:80", Backend: "api", State: "Draining"}, http.StatusNotFound, `backend: policy default/web has no backend "api" (it has app)`},
	} {
		_, err := admin.SetEndpointState(ctx, "default", "web", c.req)
		if e := apiErr(t, err); e.Status != c.code || !strings.Contains(strings.Join(e.Errors, "; "), c.msg) {
			t.Errorf("%+v: %d %q, want %d %q", c.req, e.Status, e.Errors, c.code, c.msg)
		}
	}
	if _, err := admin.SetEndpointState(ctx, "default", "nope", drain); apiErr(t, err).Status != http.StatusNotFound {
		t.Errorf("a policy that does not exist: %v", err)
	}

	res, err := admin.SetEndpointState(ctx, "default", "web", drain)
	if err != nil || !res.Changed || res.Endpoints != 1 || len(res.Overrides) != 1 || res.Overrides[0].State != v1alpha1.OverrideDraining {
		t.Fatalf("drain: %+v, %v", res, err)
	}
	if res, err = admin.SetEndpointState(ctx, "default", "web", drain); err != nil || res.Changed {
		t.Errorf("draining again changed something: %+v, %v", res, err)
	}
	if _, err := admin.SetEndpointState(ctx, "default", "web", apiwire.EndpointStateRequest{Endpoint: "198.51.100.2", State: "Maintenance"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"198.51.100.1 DRAINING", "198.51.100.3 DRAINING"}
	if got := servedAddrs(t, s); !slices.Equal(got, want) {
		t.Fatalf("after drain and maintenance: %v, want %v", got, want)
	}
	// Status lists them, and a push of the policy keeps them.
	p, err := reader.Get(ctx, "default", "web")
	if err != nil || len(p.Status.EndpointOverrides) != 2 || p.Status.EndpointOverrides[1].Endpoint != "198.51.100.2" || p.Status.EndpointOverrides[1].Endpoints != 1 {
		t.Fatalf("status: %+v, %v", p.Status.EndpointOverrides, err)
	}
	if _, err := admin.Apply(ctx, []byte(strings.Replace(overridesDoc, "port: 10090", "port: 10091", 1)), false); err != nil {
		t.Fatal(err)
	}
	if got := servedAddrs(t, s); !slices.Equal(got, want) {
		t.Fatalf("after a push: %v, want %v", got, want)
	}
	list, err := reader.EndpointOverrides(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "web" || len(list[0].Overrides) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}

	// Another server on the same store (a restart) serves them before anything is pushed.
	s2, url2, _ := pushapitest.StartOn(t, st, "admin", nil)
	if got := servedAddrs(t, s2); !slices.Equal(got, want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}

	// Ready: the override goes; the spec's own drain stays, and the answer says so.
	admin2 := &pushapi.Client{BaseURL: url2, Token: "admin"}
	if _, err := admin2.SetEndpointState(ctx, "default", "web", apiwire.EndpointStateRequest{Endpoint: "198.51.100.2", State: "Ready"}); err != nil {
		t.Fatal(err)
	}
	res, err = admin2.SetEndpointState(ctx, "default", "web", apiwire.EndpointStateRequest{Endpoint: "198.51.100.3:80", State: "Ready"})
	if err != nil || res.Changed || !slices.Equal(res.SpecDraining, []string{"198.51.100.3:80"}) {
		t.Fatalf("ready of the spec's drain: %+v, %v", res, err)
	}
	if got, want := servedAddrs(t, s2), []string{"198.51.100.1 DRAINING", "198.51.100.2 UNKNOWN", "198.51.100.3 DRAINING"}; !slices.Equal(got, want) {
		t.Fatalf("after ready: %v, want %v", got, want)
	}
	// Deleting the policy forgets its overrides: the same name pushed again starts without.
	if err := admin2.Delete(ctx, "default", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin2.Apply(ctx, []byte(overridesDoc), false); err != nil {
		t.Fatal(err)
	}
	if got, want := servedAddrs(t, s2), []string{"198.51.100.1 UNKNOWN", "198.51.100.2 UNKNOWN", "198.51.100.3 DRAINING"}; !slices.Equal(got, want) {
		t.Fatalf("after delete and push: %v, want %v", got, want)
	}
	if all, err := st.EndpointOverrides(); err != nil || len(all) != 0 {
		t.Fatalf("the store keeps %q, %v", all, err)
	}
}
