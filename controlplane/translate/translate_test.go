package translate_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/internal/tools"
)

func pol(name string, created time.Time) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 80, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
}

// The older policy wins a conflict even when both were created within the same second.
func TestOlderWinsWithinOneSecond(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older, newer := pol("zz-older", base.Add(100*time.Millisecond)), pol("aa-newer", base.Add(900*time.Millisecond))
	for _, order := range [][]*v1alpha1.LoadBalancerPolicy{{older, newer}, {newer, older}} {
		res := translate.Translate(order, translate.Refs{})
		o, n := res.Policies.Of(objkey.Of(older)), res.Policies.Of(objkey.Of(newer))
		if !o.Accepted || n.Accepted || !strings.Contains(n.AcceptedMessage, "already served by policy default/zz-older") {
			t.Errorf("older accepted=%v, newer accepted=%v (%s)", o.Accepted, n.Accepted, n.AcceptedMessage)
		}
	}
}

func TestTranslateDoesNotModifyItsInput(t *testing.T) {
	p := pol("a", time.Now())
	before := p.Spec.Listener.Address
	translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{})
	if p.Namespace != "" || p.Spec.Listener.Address != before || p.Spec.ProxyGroup != "" {
		t.Error("translate changed its input")
	}
}

func TestServiceBackendsResolveFromEndpointSlices(t *testing.T) {
	p := pol("svc", time.Now())
	p.Namespace = "shop"
	p.Spec.Backends = []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: "web", Port: 80}},
		{Name: "gone", Service: &v1alpha1.ServiceRef{Name: "gone", PortName: "http"}}}
	refs := translate.Refs{Services: map[translate.ServiceRef]translate.ServiceEndpoints{
		{Namespace: "shop", Name: "web", Port: 80}: {Endpoints: []translate.ServiceEndpoint{
			{Address: "10.0.0.2", Port: 8080, Ready: true},
			{Address: "10.0.0.1", Port: 8080, Ready: true, Zone: "zone-a"},
			{Address: "10.0.0.3", Port: 8080, Terminating: true},
			{Address: "10.0.0.4", Port: 8080}, // not ready, not terminating: left out
		}},
		{Namespace: "shop", Name: "gone", PortName: "http"}: {Err: "Service shop/gone not found"},
	}}
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, refs)
	r := res.Policies.Of(objkey.Of(p))
	if !r.Accepted || r.ResolvedRefs || !strings.Contains(r.ResolvedRefsMessage, "spec.backends[1].service: Service shop/gone not found") {
		t.Fatalf("accepted %v resolved %v: %s", r.Accepted, r.ResolvedRefs, r.ResolvedRefsMessage)
	}
	g := res.IR.Groups["default"]
	var web []string
	for _, c := range g.Clusters {
		if c.Name == "shop/svc/web" {
			for _, e := range c.Endpoints {
				web = append(web, fmt.Sprintf("%s:%d draining=%v %s", e.Address, e.Port, e.Draining, e.Zone))
			}
		}
	}
	want := []string{"10.0.0.1:8080 draining=false zone-a", "10.0.0.2:8080 draining=false ", "10.0.0.3:8080 draining=true "}
	if strings.Join(web, ",") != strings.Join(want, ",") {
		t.Errorf("endpoints %v, want %v", web, want)
	}
}

// Endpoints found through a Service are probed like listed ones: on the health check's port, and by HTTP
// with their own address as Host. Left to Envoy, the Host would be the cluster name ("shop/svc/web"), which
// Go's HTTP server answers with 400: every probe would fail and the cluster would run in panic.
func TestServiceEndpointsAreProbedWithTheirOwnAddress(t *testing.T) {
	for _, c := range []struct {
		name     string
		port     *int32
		host     string
		wantHost string
		wantPort uint32
	}{
		{name: "defaults", wantHost: "10.0.0.1:8080"},
		{name: "probe port", port: ptrTo(int32(9090)), wantHost: "10.0.0.1:9090", wantPort: 9090},
		{name: "host of the policy's own", host: "health.example", wantHost: ""},
	} {
		p := pol("svc", time.Now())
		p.Namespace = "shop"
		p.Spec.Backends = []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: "web", Port: 80},
			BackendSettings: v1alpha1.BackendSettings{HealthCheck: &v1alpha1.HealthCheck{Active: &v1alpha1.ActiveHealthCheck{Type: v1alpha1.HealthCheckHTTP, Port: c.port,
				HTTP: &v1alpha1.HTTPHealthCheck{Path: "/healthz", Host: c.host}}}}}}
		refs := translate.Refs{Services: map[translate.ServiceRef]translate.ServiceEndpoints{
			{Namespace: "shop", Name: "web", Port: 80}: {Endpoints: []translate.ServiceEndpoint{{Address: "10.0.0.1", Port: 8080, Ready: true}}},
		}}
		res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, refs)
		if r := res.Policies.Of(objkey.Of(p)); !r.Accepted || !r.ResolvedRefs {
			t.Fatalf("%s: accepted %v resolved %v: %s %s", c.name, r.Accepted, r.ResolvedRefs, r.AcceptedMessage, r.ResolvedRefsMessage)
		}
		var found bool
		for _, cl := range res.IR.Groups["default"].Clusters {
			if cl.Name != "shop/svc/web" {
				continue
			}
			if len(cl.Endpoints) != 1 {
				t.Fatalf("%s: endpoints %+v, want 1", c.name, cl.Endpoints)
			}
			found = true
			if e := cl.Endpoints[0]; e.HealthCheckHost != c.wantHost || e.HealthCheckPort != c.wantPort {
				t.Errorf("%s: probes carry Host %q on port %d, want %q on %d", c.name, e.HealthCheckHost, e.HealthCheckPort, c.wantHost, c.wantPort)
			}
		}
		if !found {
			t.Fatalf("%s: no cluster shop/svc/web", c.name)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestCrossNamespaceServicesNeedPermission(t *testing.T) {
	p := pol("svc", time.Now())
	p.Namespace = "shop"
	p.Spec.Backends = []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: "web", Namespace: "billing", Port: 80}}}
	services := map[translate.ServiceRef]translate.ServiceEndpoints{{Namespace: "billing", Name: "web", Port: 80}: {
		Endpoints: []translate.ServiceEndpoint{{Address: "10.0.0.1", Port: 80, Ready: true}}}}
	r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Services: services}).Policies.Of(objkey.Of(p))
	if r.ResolvedRefs || !strings.Contains(r.ResolvedRefsMessage, "another namespace, which is not allowed") || r.Endpoints != 0 {
		t.Errorf("a cross-namespace reference resolved without permission: %v %s", r.ResolvedRefs, r.ResolvedRefsMessage)
	}
	r = translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Services: services, CrossNamespace: true}).Policies.Of(objkey.Of(p))
	if !r.ResolvedRefs || r.Endpoints != 1 || r.HealthyEndpoints != 1 {
		t.Errorf("with permission: %v %s, %d endpoints", r.ResolvedRefs, r.ResolvedRefsMessage, r.Endpoints)
	}
	// The Service's own grant: for the namespaces it names (or "*"), not for others.
	ref := translate.ServiceRef{Namespace: "billing", Name: "web", Port: 80}
	for _, c := range []struct {
		grant string
		ok    bool
	}{{"shop", true}, {"front, shop", true}, {"*", true}, {"front", false}, {"", false}, {"shopping", false}} {
		se := services[ref]
		se.GrantedTo = translate.Grants(c.grant)
		granted := map[translate.ServiceRef]translate.ServiceEndpoints{ref: se}
		r = translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Services: granted}).Policies.Of(objkey.Of(p))
		if r.ResolvedRefs != c.ok || (c.ok && r.Endpoints != 1) {
			t.Errorf("grant %q: resolved %v (%s), %d endpoints; want resolved %v", c.grant, r.ResolvedRefs, r.ResolvedRefsMessage, r.Endpoints, c.ok)
		}
	}
	// A missing Service reads the same as one that exists but grants nothing.
	missing := map[translate.ServiceRef]translate.ServiceEndpoints{ref: {Err: "Service billing/web not found"}}
	r = translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Services: missing}).Policies.Of(objkey.Of(p))
	if !strings.Contains(r.ResolvedRefsMessage, "another namespace, which is not allowed") || strings.Contains(r.ResolvedRefsMessage, "not found") {
		t.Errorf("a missing Service in another namespace: %s", r.ResolvedRefsMessage)
	}
}

// A route without a retry block retries only what never reached an endpoint; a block with attempts: 0
// turns that off, and the implicit route of a policy without routes has the same default.
func TestDefaultRetryIsConnectFailureOnlyAndCanBeTurnedOff(t *testing.T) {
	implicit := pol("implicit", time.Now())
	explicit := pol("explicit", time.Now())
	explicit.Spec.Listener.Port = 81
	explicit.Spec.Routes = []v1alpha1.Route{
		{Name: "default", Backends: []v1alpha1.BackendRef{{Name: "a"}}},
		{Name: "off", Match: v1alpha1.RouteMatch{Path: &v1alpha1.PathMatch{Value: "/off"}}, Backends: []v1alpha1.BackendRef{{Name: "a"}},
			Retry: &v1alpha1.Retry{Attempts: new(int32(0))}},
	}
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{implicit, explicit}, translate.Refs{})
	routes := map[string]string{}
	for _, l := range res.IR.Groups["default"].Listeners {
		for _, vh := range l.VirtualHosts {
			for _, r := range vh.Routes {
				if r.Retry == nil {
					routes[r.Name] = "none"
					continue
				}
				routes[r.Name] = fmt.Sprintf("%s x%d avoid=%v", strings.Join(r.Retry.On, ","), r.Retry.Attempts, r.Retry.AvoidPreviousHosts)
			}
		}
	}
	want := map[string]string{
		"default/implicit/default": "connect-failure,refused-stream x2 avoid=true",
		"default/explicit/default": "connect-failure,refused-stream x2 avoid=true",
		"default/explicit/off":     "connect-failure,refused-stream,reset x0 avoid=true",
	}
	for name, w := range want {
		if routes[name] != w {
			t.Errorf("%s: retry %q, want %q (all: %v)", name, routes[name], w, routes)
		}
	}
}

// TestServiceEndpointsInRefusedRangesDoNotResolve: an EndpointSlice is written by whoever may write one; an
// address in a refused range (loopback, link-local) leaves the Service reference unresolved with the reason,
// and none of the Service's endpoints is sent, unless the operator re-admitted the range; the Envoy host's own
// address and lbplane's own ports are refused the same way. A Kubernetes policy naming an
// endpoint address directly is invalid by default, the field named.
func TestServiceEndpointsInRefusedRangesDoNotResolve(t *testing.T) {
	p := pol("svc", time.Now())
	p.Namespace = "shop"
	p.Spec.Backends = []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: "web", Port: 80}}}
	for _, addr := range []string{"127.0.0.1", "169.254.169.254", "::1", "fe80::1"} {
		services := map[translate.ServiceRef]translate.ServiceEndpoints{{Namespace: "shop", Name: "web", Port: 80}: {
			Endpoints: []translate.ServiceEndpoint{{Address: "10.0.0.1", Port: 80, Ready: true}, {Address: addr, Port: 80, Ready: true}}}}
		refs := translate.Refs{Services: services, Reach: reach.Rules{Kubernetes: true}}
		res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, refs)
		r := res.Policies.Of(objkey.Of(p))
		var sent int
		for _, g := range res.IR.Groups {
			for _, c := range g.Clusters {
				sent += len(c.Endpoints)
			}
		}
		if r.ResolvedRefs || !strings.Contains(r.ResolvedRefsMessage, "spec.backends[0].service: Service shop/web: "+addr+" is") || sent != 0 || r.Endpoints != 0 {
			t.Errorf("%s: resolved %v (%s), %d endpoints sent", addr, r.ResolvedRefs, r.ResolvedRefsMessage, sent)
		}
		refs.Reach.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::/0"), netip.MustParsePrefix("169.254.0.0/16")}
		if r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, refs).Policies.Of(objkey.Of(p)); !r.ResolvedRefs || r.Endpoints != 2 {
			t.Errorf("%s re-admitted: resolved %v (%s), %d endpoints", addr, r.ResolvedRefs, r.ResolvedRefsMessage, r.Endpoints)
		}
	}
	// The Envoy's own host, and lbplane's port on loopback even where loopback is re-admitted.
	host := reach.Rules{Kubernetes: true, Allow: reach.Loopback.Allow, Self: []netip.Addr{netip.MustParseAddr("198.51.100.1")},
		OwnPorts: []reach.OwnPort{{Port: 18000, What: "lbplane's xDS port"}}}
	for ep, want := range map[translate.ServiceEndpoint]string{
		{Address: "198.51.100.1", Port: 80, Ready: true}: "198.51.100.1 is an address of the Envoy's or lbplane's own host",
		{Address: "127.0.0.1", Port: 18000, Ready: true}: "127.0.0.1 port 18000 is lbplane's xDS port",
	} {
		services := map[translate.ServiceRef]translate.ServiceEndpoints{{Namespace: "shop", Name: "web", Port: 80}: {Endpoints: []translate.ServiceEndpoint{ep}}}
		r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, translate.Refs{Services: services, Reach: host}).Policies.Of(objkey.Of(p))
		if r.ResolvedRefs || !strings.Contains(r.ResolvedRefsMessage, "Service shop/web: "+want) {
			t.Errorf("%s:%d: resolved %v (%s)", ep.Address, ep.Port, r.ResolvedRefs, r.ResolvedRefsMessage)
		}
	}
	raw := pol("raw", time.Now())
	raw.Namespace = "shop"
	raw.Spec.Backends = []v1alpha1.Backend{{Name: "web", Endpoints: []v1alpha1.Endpoint{{Address: "198.51.100.7", Port: 80}}}}
	r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{raw}, translate.Refs{Services: map[translate.ServiceRef]translate.ServiceEndpoints{},
		Reach: reach.Rules{Kubernetes: true}}).Policies.Of(objkey.Of(raw))
	if r.Accepted || len(r.Errors) != 1 || r.Errors[0].Path != "spec.backends[0].endpoints[0].address" || !strings.Contains(r.Errors[0].Msg, `not allowed in namespace "shop"`) {
		t.Errorf("a raw address in Kubernetes mode: accepted %v, %v", r.Accepted, r.Errors)
	}
}

// A listener certificate from another namespace's Secret is served only with permission: the operator's
// (--allow-cross-namespace-refs) or, for the policies a Gateway becomes, a ReferenceGrant its source checked.
func TestCrossNamespaceCertificatesNeedPermission(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "examples", "certs", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p := pol("tls", time.Now())
	p.Namespace = "shop"
	p.Spec.Listener.Protocol = v1alpha1.ProtocolHTTPS
	p.Spec.Listener.TLS = &v1alpha1.ListenerTLS{Certificates: []v1alpha1.Certificate{{SecretName: "cert", SecretNamespace: "billing"}}}
	secrets := map[translate.SecretRef]translate.TLSSecret{{Namespace: "billing", Name: "cert"}: {Cert: read("app.example.com.crt"), Key: read("app.example.com.key")}}
	if refs := translate.SecretRefs(p); !slices.Equal(refs, []translate.SecretRef{{Namespace: "billing", Name: "cert"}}) {
		t.Fatalf("the policy references %v, want billing/cert", refs)
	}
	served := func(refs translate.Refs) (bool, string) {
		res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, refs)
		r := res.Policies.Of(objkey.Of(p))
		g := res.IR.Groups["default"]
		if g == nil {
			return false, r.ResolvedRefsMessage
		}
		for _, s := range g.Secrets {
			if s.CertificateChain != nil {
				return r.ResolvedRefs, r.ResolvedRefsMessage
			}
		}
		return false, r.ResolvedRefsMessage
	}
	if ok, msg := served(translate.Refs{Secrets: secrets}); ok || !strings.Contains(msg, "spec.listener.tls.certificates[0].secretNamespace: Secret billing/cert is in another namespace, which is not allowed") {
		t.Errorf("without permission: served %v, %q", ok, msg)
	}
	if ok, msg := served(translate.Refs{Secrets: secrets, CrossNamespace: true}); !ok {
		t.Errorf("with --allow-cross-namespace-refs: not served: %s", msg)
	}
	if ok, msg := served(translate.Refs{Secrets: secrets, Granted: map[objkey.Key]bool{objkey.Of(p): true}}); !ok {
		t.Errorf("granted: not served: %s", msg)
	}
}
