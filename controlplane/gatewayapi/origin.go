package gatewayapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// What a Gateway's policy says of where it came from, beside AnnotationGateway, AnnotationPort and
// AnnotationHostname: the listeners whose requests it serves, and the HTTPRoute rule each of its routes was
// made of. lbctl trace, whatif, status and the dashboard read them to speak of Gateways, listeners and
// HTTPRoutes rather than of generated names.
const (
	// AnnotationListeners lists the names of the Gateway's listeners the policy serves, comma-separated and
	// sorted.
	AnnotationListeners = "gateway.lbplane.io/listeners"
	// AnnotationRules maps each route of spec.routes, by name, to the HTTPRoute rule and match it was made
	// of (a JSON object of RuleRef). A policy with nothing attached (its one route answers 404) has none.
	AnnotationRules = "gateway.lbplane.io/rules"
)

// RuleRef names one match of one HTTPRoute rule: what a route of a Gateway's policy was made of.
type RuleRef struct {
	// Route is the HTTPRoute, namespace/name.
	Route string `json:"route"`
	// Rule is the index of the rule in spec.rules, and Name its name when it has one.
	Rule int    `json:"rule"`
	Name string `json:"name,omitempty"`
	// Match is the index of the match in the rule's matches (0 for a rule without matches, which matches
	// every request).
	Match int `json:"match"`
}

// String names the rule as a user finds it in the HTTPRoute: "HTTPRoute shop/web spec.rules[1] (name
// api).matches[0]".
func (r RuleRef) String() string {
	name := ""
	if r.Name != "" {
		name = " (name " + r.Name + ")"
	}
	return fmt.Sprintf("HTTPRoute %s spec.rules[%d]%s.matches[%d]", r.Route, r.Rule, name, r.Match)
}

// Served is what the annotations of a Gateway's policy say it serves.
type Served struct {
	// Gateway is the Gateway's namespace/name.
	Gateway types.NamespacedName
	// Port is the Gateway listener port (the one clients connect to on the Gateway's address), not the
	// Envoy port behind it.
	Port int32
	// Hostname is the host name the policy serves; "" is every host name no other policy of the port
	// serves.
	Hostname string
	// Listeners are the names of the listeners whose requests for Hostname the policy serves.
	Listeners []string
}

// ServedBy reads what p serves from its annotations; false for a policy that is not a Gateway's.
func ServedBy(p *v1alpha1.LoadBalancerPolicy) (Served, bool) {
	a := p.Annotations
	gw, ok := a[AnnotationGateway]
	if !ok {
		return Served{}, false
	}
	key, ok := objkey.Parse(gw)
	port, err := strconv.ParseInt(a[AnnotationPort], 10, 32)
	if !ok || err != nil {
		return Served{}, false
	}
	s := Served{Gateway: key, Port: int32(port), Hostname: a[AnnotationHostname]}
	if l := a[AnnotationListeners]; l != "" {
		s.Listeners = strings.Split(l, ",")
	}
	return s, true
}

// RulesOf reads AnnotationRules: the HTTPRoute rule of each route of p, by route name. A policy that is
// not a Gateway's, or has no route made of a rule, has none.
func RulesOf(p *v1alpha1.LoadBalancerPolicy) (map[string]RuleRef, error) {
	v, ok := p.Annotations[AnnotationRules]
	if !ok {
		return nil, nil
	}
	var out map[string]RuleRef
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("annotation %s of %s/%s: %w", AnnotationRules, p.Namespace, p.Name, err)
	}
	return out, nil
}

// HostFor picks, of the host names one port of a Gateway serves (the Hostname of each of its policies),
// the one a request for host is served by, as the Envoy listener the port's policies share picks its
// virtual host: the name itself, else the most specific wildcard that covers it, else "" (every other
// name). host is the request's Host without its port. False when none serves it: Envoy answers 404.
func HostFor(host string, hostnames []string) (string, bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	best, found := "", false
	for _, h := range hostnames {
		if !covers(h, host) {
			continue
		}
		if !found || moreSpecific(h, best) {
			best, found = h, true
		}
	}
	return best, found
}
