package reach_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/reach"
)

func policyWith(ns string, addrs ...string) *v1alpha1.LoadBalancerPolicy {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Namespace, p.Name = ns, "p"
	var eps []v1alpha1.Endpoint
	for _, a := range addrs {
		eps = append(eps, v1alpha1.Endpoint{Address: a, Port: 8080})
	}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "app", Endpoints: eps}}
	p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "app"}}, Mirrors: []v1alpha1.Mirror{{Backend: "app"}}}}
	return p
}

func TestForbiddenAddressesAreRefusedByDefault(t *testing.T) {
	refused := []string{"127.0.0.1", "127.255.0.9", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "0.1.2.3", "::",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "localhost", "LOCALHOST.", "app.localhost", "ip6-localhost",
		"localhost.localdomain", "127.1", "2130706433", "0x7f.1"}
	allowed := []string{"198.51.100.7", "10.0.0.1", "2001:db8::1", "app.example.com", "fd00::1"}
	var r reach.Rules
	for _, a := range refused {
		errs := r.Check(policyWith("default", a))
		if len(errs) != 1 || errs[0].Path != "spec.backends[0].endpoints[0].address" {
			t.Errorf("%s: want one error on spec.backends[0].endpoints[0].address, got %v", a, errs)
			continue
		}
		if !strings.Contains(errs[0].Msg, "spec.routes[0].mirrors[0]") {
			t.Errorf("%s: the error does not name the mirror that targets the backend: %s", a, errs[0].Msg)
		}
	}
	for _, a := range allowed {
		if errs := r.Check(policyWith("default", a)); len(errs) != 0 {
			t.Errorf("%s: refused by default: %v", a, errs)
		}
	}
	errs := r.Check(policyWith("default", "198.51.100.1", "127.0.0.1", "169.254.1.1"))
	if len(errs) != 2 || errs[0].Path != "spec.backends[0].endpoints[1].address" || errs[1].Path != "spec.backends[0].endpoints[2].address" {
		t.Errorf("every refused endpoint is named by its own path: %v", errs)
	}
	if !strings.Contains(errs[0].Msg, "loopback") || !strings.Contains(errs[1].Msg, "link-local") {
		t.Errorf("the reason names the range: %v", errs)
	}
}

func TestAllowReadmitsOnlyItsRange(t *testing.T) {
	allow, err := reach.ParseCIDRs("--allow-backend-cidrs", []string{"127.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	r := reach.Rules{Allow: allow}
	for _, a := range []string{"127.0.0.1", "127.0.0.3", "::1", "::ffff:127.0.0.1", "localhost"} {
		if errs := r.Check(policyWith("default", a)); len(errs) != 0 {
			t.Errorf("%s: refused with 127.0.0.0/8 and ::1 allowed: %v", a, errs)
		}
	}
	for _, a := range []string{"169.254.169.254", "0.0.0.0", "fe80::1", "::"} {
		if errs := r.Check(policyWith("default", a)); len(errs) != 1 {
			t.Errorf("%s: accepted with only loopback allowed: %v", a, errs)
		}
	}
	// localhost may resolve to either loopback address: both must be allowed.
	v4only, _ := reach.ParseCIDRs("x", []string{"127.0.0.0/8"})
	if errs := (reach.Rules{Allow: v4only}).Check(policyWith("default", "localhost")); len(errs) != 1 {
		t.Errorf("localhost accepted with only 127.0.0.0/8 allowed (it may resolve to ::1): %v", errs)
	}
	if _, err := reach.ParseCIDRs("--allow-backend-cidrs", []string{"127.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), "--allow-backend-cidrs") {
		t.Errorf("a bad CIDR is an error naming the flag, got %v", err)
	}
}

func TestKubernetesModeAllowsServicesOnly(t *testing.T) {
	cidrs, _ := reach.ParseCIDRs("x", []string{"198.51.100.0/24"})
	r := reach.Rules{Kubernetes: true}
	for _, a := range []string{"198.51.100.7", "app.example.com"} {
		errs := r.Check(policyWith("team-a", a))
		if len(errs) != 1 || !strings.Contains(errs[0].Msg, `not allowed in namespace "team-a"`) {
			t.Errorf("%s: Kubernetes mode without settings must refuse it: %v", a, errs)
		}
	}
	r = reach.Rules{Kubernetes: true, AddressNamespaces: []string{"edge"}, AddressCIDRs: cidrs}
	cases := []struct {
		ns, addr string
		ok       bool
	}{
		{"edge", "203.0.113.9", true},
		{"edge", "app.example.com", true},
		{"edge", "127.0.0.1", false}, // the forbidden ranges stay forbidden
		{"team-a", "198.51.100.7", true},
		{"team-a", "203.0.113.9", false},
		{"team-a", "app.example.com", false},
	}
	for _, c := range cases {
		errs := r.Check(policyWith(c.ns, c.addr))
		if (len(errs) == 0) != c.ok {
			t.Errorf("namespace %s, %s: allowed=%v, errors %v", c.ns, c.addr, c.ok, errs)
		}
	}
	all := reach.Rules{Kubernetes: true, AddressNamespaces: []string{"*"}}
	if errs := all.Check(policyWith("any", "203.0.113.9")); len(errs) != 0 {
		t.Errorf("'*' allows every namespace: %v", errs)
	}
}

func TestCheckAddr(t *testing.T) {
	var r reach.Rules
	for _, a := range []string{"127.0.0.1", "::1", "169.254.1.1", "fe80::2", "0.0.0.0", "::", "::ffff:127.0.0.1"} {
		if r.CheckAddr(netip.MustParseAddr(a)) == "" {
			t.Errorf("%s allowed", a)
		}
	}
	if msg := r.CheckAddr(netip.MustParseAddr("10.1.2.3")); msg != "" {
		t.Errorf("a pod address refused: %s", msg)
	}
}

// TestEmbeddedIPv4FormsAreJudgedByWhatTheyCarry: an IPv6 address that carries a forbidden IPv4 address
// (IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo) is refused as that address is, and the same forms
// of an allowed address are allowed.
func TestEmbeddedIPv4FormsAreJudgedByWhatTheyCarry(t *testing.T) {
	var r reach.Rules
	refused := map[string]string{
		"::127.0.0.1":                 "127.0.0.1 is a loopback",
		"::ffff:0:127.0.0.1":          "127.0.0.1 is a loopback",
		"64:ff9b::7f00:1":             "127.0.0.1 is a loopback",
		"64:ff9b::a9fe:a9fe":          "169.254.169.254 is a link-local",
		"64:ff9b:1::7f00:1":           "127.0.0.1 is a loopback",
		"2002:7f00:1::":               "127.0.0.1 is a loopback",
		"2002:a9fe:a9fe::1":           "169.254.169.254 is a link-local",
		"2001:0:7f00:1::1":            "127.0.0.1 is a loopback",       // Teredo server
		"2001:0:c633:6401::80ff:fffe": "127.0.0.1 is a loopback",       // Teredo client, inverted
		"::0.0.0.9":                   "0.0.0.9 is an unspecified",     // IPv4-compatible of 0/8
		"2002::":                      "0.0.0.0 is an unspecified",     // 6to4 of 0.0.0.0
		"64:ff9b::":                   "0.0.0.0 is an unspecified",     // NAT64 of 0.0.0.0
		"::ffff:169.254.169.254":      "169.254.169.254 is a link-loc", // mapped: unmapped first
	}
	for a, want := range refused {
		msg := r.CheckAddr(netip.MustParseAddr(a))
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want it refused as %q", a, msg, want)
		}
		if errs := r.Check(policyWith("default", a)); len(errs) != 1 {
			t.Errorf("%s: a policy naming it is not refused: %v", a, errs)
		}
	}
	for _, a := range []string{"64:ff9b::c633:6407", "2002:c633:6407::1", "::198.51.100.7", "2001:db8::7f00:1"} {
		if msg := r.CheckAddr(netip.MustParseAddr(a)); msg != "" {
			t.Errorf("%s refused: %s", a, msg)
		}
	}
	// Re-admitting loopback re-admits its embedded forms too.
	lo := reach.Rules{Allow: reach.Loopback.Allow}
	for _, a := range []string{"::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"} {
		if msg := lo.CheckAddr(netip.MustParseAddr(a)); msg != "" {
			t.Errorf("%s refused with loopback allowed: %s", a, msg)
		}
	}
}

// TestOwnHostAndPorts: the Envoy host's own addresses are refused like loopback; lbplane's and Envoy's
// own ports are refused on every host address even where the address is re-admitted, and allowed
// elsewhere.
func TestOwnHostAndPorts(t *testing.T) {
	self := netip.MustParseAddr("198.51.100.1")
	r := reach.Rules{Self: []netip.Addr{self}, OwnPorts: []reach.OwnPort{{Port: 18000, What: "lbplane's xDS"}, {Port: 9901, What: "an Envoy's stats"}}}
	if msg := r.CheckAddr(self); !strings.Contains(msg, "Envoy's or lbplane's own host") {
		t.Errorf("the Envoy host's address: %q", msg)
	}
	if msg := r.CheckAddr(netip.MustParseAddr("2002:c633:6401::")); !strings.Contains(msg, "Envoy's or lbplane's own host") {
		t.Errorf("the Envoy host's address in 6to4 form: %q", msg)
	}
	r.Allow = append(slices.Clone(reach.Loopback.Allow), netip.MustParsePrefix("198.51.100.1/32"))
	for _, c := range []struct {
		addr string
		port uint32
		want string
	}{
		{"127.0.0.1", 18000, "lbplane's xDS"}, {"127.0.0.9", 9901, "an Envoy's stats"}, {"::1", 9901, "an Envoy's stats"},
		{"198.51.100.1", 18000, "lbplane's xDS"}, {"::ffff:127.0.0.1", 18000, "lbplane's xDS"}, {"::127.0.0.1", 18000, "lbplane's xDS"},
		{"127.0.0.1", 8080, ""}, {"198.51.100.1", 8080, ""}, {"198.51.100.2", 18000, ""},
	} {
		msg := r.CheckEndpoint(netip.MustParseAddr(c.addr), c.port)
		if (c.want == "") != (msg == "") || !strings.Contains(msg, c.want) {
			t.Errorf("%s:%d: %q, want %q", c.addr, c.port, msg, c.want)
		}
	}
	p := policyWith("default", "localhost")
	p.Spec.Backends[0].Endpoints[0].Port = 9901
	if errs := r.Check(p); len(errs) != 1 || !strings.Contains(errs[0].Msg, "an Envoy's stats") {
		t.Errorf("localhost on the stats port: %v", errs)
	}
	if r.Key() == (reach.Rules{Allow: r.Allow}).Key() {
		t.Error("the rules' key does not cover the host's addresses and ports")
	}
}

// --allow-backend-cidrs with ports re-admits an address on those ports only; a range given on every port as
// well keeps every port; the reason names what is re-admitted.
func TestAllowOnSomePortsOnly(t *testing.T) {
	allow, ports, err := reach.ParseAllow("--allow-backend-cidrs", []string{"127.0.0.1:18081-18083", "[::1]:8080", "169.254.0.0/16:53"})
	if err != nil {
		t.Fatal(err)
	}
	r := reach.Rules{Allow: allow, AllowPorts: ports}
	at := func(addr string, port int32) *v1alpha1.LoadBalancerPolicy {
		p := policyWith("default", addr)
		p.Spec.Backends[0].Endpoints[0].Port = port
		return p
	}
	for _, ok := range []struct {
		addr string
		port int32
	}{{"127.0.0.1", 18081}, {"127.0.0.1", 18083}, {"::ffff:127.0.0.1", 18082}, {"::1", 8080}, {"169.254.169.254", 53}, {"localhost", 18082}, {"198.51.100.7", 22}} {
		if errs := r.Check(at(ok.addr, ok.port)); len(errs) != 0 {
			t.Errorf("%s:%d: refused: %v", ok.addr, ok.port, errs)
		}
	}
	for _, bad := range []struct {
		addr string
		port int32
	}{{"127.0.0.1", 18001}, {"127.0.0.1", 2379}, {"127.0.0.2", 18081}, {"::1", 8081}, {"169.254.169.254", 80}, {"localhost", 18001}, {"::127.0.0.1", 22}, {"64:ff9b::7f00:1", 22}} {
		errs := r.Check(at(bad.addr, bad.port))
		if len(errs) != 1 {
			t.Errorf("%s:%d: %v, want one refusal", bad.addr, bad.port, errs)
		}
	}
	if errs := r.Check(at("127.0.0.1", 18001)); len(errs) != 1 || !strings.Contains(errs[0].Msg, "127.0.0.1:18081-18083 only") {
		t.Errorf("the reason does not name what is re-admitted: %v", errs)
	}
	if s := r.Summary(); !strings.Contains(s, "127.0.0.1:18081-18083") || !strings.Contains(s, "[::1]:8080") {
		t.Errorf("summary %q does not name the ports", s)
	}
	// A range on every port wins over a narrower entry with ports.
	allow, ports, err = reach.ParseAllow("--allow-backend-cidrs", []string{"127.0.0.0/8", "127.0.0.1:80"})
	if err != nil || len(ports) != 0 {
		t.Fatalf("%v %v", ports, err)
	}
	if errs := (reach.Rules{Allow: allow, AllowPorts: ports}).Check(at("127.0.0.1", 2379)); len(errs) != 0 {
		t.Errorf("127.0.0.0/8 on every port: %v", errs)
	}
	for _, bad := range []string{"127.0.0.1:", "127.0.0.1:0", "127.0.0.1:90-80", "127.0.0.1:http", "[::1]80", "10.0.0.300:80"} {
		if _, _, err := reach.ParseAllow("--allow-backend-cidrs", []string{bad}); err == nil || !strings.Contains(err.Error(), "--allow-backend-cidrs") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
}
