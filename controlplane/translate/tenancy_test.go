package translate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/tenancy"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// tenant is a policy of namespace ns on port 80, created at minute min after base, naming hosts.
func tenant(ns, name string, min int, hosts ...string) *v1alpha1.LoadBalancerPolicy {
	p := pol(name, time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC))
	p.Namespace, p.Spec.Listener.Hostnames = ns, hosts
	return p
}

// servedDomains lists the domains of port 80's listener in group default.
func servedDomains(res *translate.Result) []string {
	var out []string
	g := res.IR.Groups["default"]
	if g == nil {
		return nil
	}
	for _, l := range g.Listeners {
		for _, vh := range l.VirtualHosts {
			out = append(out, vh.Source.Namespace+"/"+vh.Source.Name+"="+strings.Join(vh.Domains, ","))
		}
	}
	return out
}

func mustRules(t *testing.T, doc string) tenancy.Rules {
	t.Helper()
	r, err := tenancy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The attack of issue 49 item 1: default/demo serves port 80 with no host names (every host); a tenant of
// team-a names app.example.com, or *.example.com, on the same port. Each is refused, naming the holder, and
// nothing of demo's traffic moves. A translator fed the same changes one by one agrees.
func TestAnotherNamespaceCannotTakeOverHostNames(t *testing.T) {
	demo := tenant("default", "demo", 0)
	for _, hosts := range [][]string{{"app.example.com"}, {"*.example.com"}, nil} {
		ta := tenant("team-a", "ta", 1, hosts...)
		for _, res := range []*translate.Result{
			translate.Translate([]*v1alpha1.LoadBalancerPolicy{demo, ta}, translate.Refs{}),
			func() *translate.Result {
				tr := translate.NewTranslator()
				tr.Translate([]*v1alpha1.LoadBalancerPolicy{demo}, translate.Refs{})
				return tr.Translate([]*v1alpha1.LoadBalancerPolicy{demo, ta}, translate.Refs{})
			}(),
		} {
			r := res.Policies.Of(objkey.Of(ta))
			if r.Accepted || r.AcceptedReason != translate.ReasonHostnameConflict ||
				!strings.Contains(r.AcceptedMessage, "held by namespace default: policy default/demo claimed") {
				t.Errorf("team-a naming %q: accepted %t, %s: %s", hosts, r.Accepted, r.AcceptedReason, r.AcceptedMessage)
			}
			if got := strings.Join(servedDomains(res), " "); got != "default/demo=*" {
				t.Errorf("team-a naming %q: port 80 serves %s, want demo alone", hosts, got)
			}
		}
	}
	// The other way round: a name held first is not taken by a later catch-all or wildcard of another
	// namespace, while the holder's own namespace may add a catch-all beside it.
	blog := tenant("team-b", "blog", 0, "blog.example.com")
	for _, late := range []*v1alpha1.LoadBalancerPolicy{tenant("default", "fallback", 1), tenant("default", "wide", 1, "*.example.com")} {
		res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{blog, late}, translate.Refs{})
		if r := res.Policies.Of(objkey.Of(late)); r.Accepted || !strings.Contains(r.AcceptedMessage, `policy team-b/blog claimed "blog.example.com" first`) {
			t.Errorf("%s after team-b/blog: accepted %t: %s", late.Name, r.Accepted, r.AcceptedMessage)
		}
	}
	own := tenant("team-b", "fallback", 1)
	if r := translate.Translate([]*v1alpha1.LoadBalancerPolicy{blog, own}, translate.Refs{}).Policies.Of(objkey.Of(own)); !r.Accepted {
		t.Errorf("a catch-all of the holder's own namespace: %s", r.AcceptedMessage)
	}
	// Created in the same second: namespace, then name, decide, the same on every replica and after a restart.
	a, b := tenant("team-a", "x", 2, "same.example.com"), tenant("team-b", "x", 2, "same.example.com")
	for _, order := range [][]*v1alpha1.LoadBalancerPolicy{{a, b}, {b, a}} {
		res := translate.Translate(order, translate.Refs{})
		if !res.Policies.Of(objkey.Of(a)).Accepted || res.Policies.Of(objkey.Of(b)).Accepted {
			t.Errorf("equal creation times: team-a/x should hold the name whatever the order")
		}
	}
}

// The operator's delegations: port 80 to default, and on it the names under team-a.example.com to team-a.
// The narrower delegation is carved out of the broader one, and delegated names are refused to every other
// namespace, whoever named them first; with undelegated: Deny a namespace may use only what it is given.
func TestDelegatedNamesBelongToTheirNamespace(t *testing.T) {
	rules := mustRules(t, `
undelegated: Deny
delegations:
  - {namespace: team-a, ports: [80], hostnames: ["*.team-a.example.com"]}
  - {namespace: default, ports: [80]}
  - {namespace: default, hostnames: ["new.example.com"]}
`)
	demo := tenant("default", "demo", 0)
	grab := tenant("default", "grab", 1, "x.team-a.example.com") // older than team-a's own
	own := tenant("team-a", "own", 2, "x.team-a.example.com")
	stray := tenant("team-a", "stray", 3, "app.example.com")
	elsewhere := tenant("team-a", "elsewhere", 3, "y.team-a.example.com")
	elsewhere.Spec.Listener.Port = 8080
	pre := tenant("team-b", "pre", 0, "new.example.com") // names what the operator gives default, first
	later := tenant("default", "later", 4, "new.example.com")
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{demo, grab, own, stray, elsewhere, pre, later}, translate.Refs{Tenancy: rules})
	want := map[*v1alpha1.LoadBalancerPolicy]string{
		demo:      "",
		own:       "",
		later:     "",
		grab:      `spec.listener.hostnames[0]: host name "x.team-a.example.com" on port 80 is delegated to namespace team-a`,
		stray:     `spec.listener.hostnames[0]: host name "app.example.com" on port 80 is delegated to namespace default`,
		elsewhere: `spec.listener.port`,
		pre:       `spec.listener.hostnames[0]: host name "new.example.com" on port 80 is delegated to namespace default`,
	}
	for p, msg := range want {
		r := res.Policies.Of(objkey.Of(p))
		switch {
		case msg == "" && !r.Accepted:
			t.Errorf("%s/%s: not accepted: %s", p.Namespace, p.Name, r.AcceptedMessage)
		case msg != "" && (r.Accepted || r.AcceptedReason != translate.ReasonNotAllowed):
			t.Errorf("%s/%s: accepted %t (%s), want NotAllowed", p.Namespace, p.Name, r.Accepted, r.AcceptedReason)
		case msg != "" && msg != "spec.listener.port" && r.AcceptedMessage != msg:
			t.Errorf("%s/%s: %q\nwant %q", p.Namespace, p.Name, r.AcceptedMessage, msg)
		}
	}
	if r := res.Policies.Of(objkey.Of(elsewhere)); !strings.Contains(r.AcceptedMessage, "port 8080 is not delegated to namespace team-a (it may use port 80; undelegated: Deny)") {
		t.Errorf("a listed namespace on another port: %s", r.AcceptedMessage)
	}
	if got, want := strings.Join(servedDomains(res), " "), "default/later=new.example.com team-a/own=x.team-a.example.com default/demo=*"; got != want {
		t.Errorf("port 80 serves %s, want %s", got, want)
	}
}
