package lbctl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// Gateways in predictions: trace and whatif take gateway/NAME instead of a policy's name, and a request
// URL (http://HOST[:PORT]/PATH) whose port is the Gateway listener's and whose host the request's Host.
// lbplane made one policy of each listener port and host name of the Gateway (gatewayapi), annotated with
// what it serves; the request's policy is found among them as Envoy finds its virtual host
// (gatewayapi.HostFor), and the answer names the Gateway, the listener and the HTTPRoute rule, which the
// policy's annotations record.

// target is what a prediction is about: a policy, or a Gateway.
type target struct {
	policy, gateway string
}

// Kinds a target may be written as, as kubectl writes them (resource, singular, short name, with group).
var (
	gatewayKinds = []string{"gateway", "gateways", "gtw", "gateway.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io"}
	policyKinds  = []string{"lbp", "loadbalancerpolicy", "loadbalancerpolicies", "loadbalancerpolicy.lbplane.io", "loadbalancerpolicies.lbplane.io"}
)

// parseTarget reads NAME, lbp/NAME or gateway/NAME.
func parseTarget(arg string) (target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	switch {
	case !ok:
		return target{policy: arg}, nil
	case name == "" || strings.Contains(name, "/"):
		return target{}, fmt.Errorf("%q: want NAME, lbp/NAME or gateway/NAME", arg)
	case slices.Contains(gatewayKinds, strings.ToLower(kind)):
		return target{gateway: name}, nil
	case slices.Contains(policyKinds, strings.ToLower(kind)):
		return target{policy: name}, nil
	}
	return target{}, fmt.Errorf("%q: kind %s is neither a LoadBalancerPolicy (NAME, lbp/NAME) nor a Gateway (gateway/NAME)", arg, kind)
}

// gatewayRequest is where a request to a Gateway goes: the listener port (0: the Gateway's only one) and
// host name ("" when the request names none), and its path with the query ("" when not given).
type gatewayRequest struct {
	port int32
	host string
	path string
}

// parseRequestURL reads a request URL: http or https, a host, and an optional port (80 and 443 by
// default) and path.
func parseRequestURL(s string) (gatewayRequest, error) {
	u, err := url.Parse(s)
	if err != nil {
		return gatewayRequest{}, fmt.Errorf("URL %q: %v", s, err)
	}
	var port int32
	switch strings.ToLower(u.Scheme) {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return gatewayRequest{}, fmt.Errorf("URL %q: want http://HOST[:PORT][/PATH] or https://..., the Gateway listener's port and the request's host", s)
	}
	if u.Hostname() == "" {
		return gatewayRequest{}, fmt.Errorf("URL %q: no host", s)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return gatewayRequest{}, fmt.Errorf("URL %q: port %q is not a port", s, p)
		}
		port = int32(n)
	}
	r := gatewayRequest{port: port, host: strings.ToLower(u.Hostname()), path: u.EscapedPath()}
	if r.path == "" && u.RawQuery != "" {
		r.path = "/"
	}
	if u.RawQuery != "" {
		r.path += "?" + u.RawQuery
	}
	return r, nil
}

// gatewayPolicy is one policy a Gateway became, with what it serves and the HTTPRoute rule of each of its
// routes.
type gatewayPolicy struct {
	policy *v1alpha1.LoadBalancerPolicy
	served gatewayapi.Served
	rules  map[string]gatewayapi.RuleRef
}

// gatewayPoliciesOf reads what each of a Gateway's policies serves.
func gatewayPoliciesOf(ps []*v1alpha1.LoadBalancerPolicy) ([]*gatewayPolicy, error) {
	var out []*gatewayPolicy
	for _, p := range ps {
		s, ok := gatewayapi.ServedBy(p)
		if !ok {
			continue
		}
		rules, err := gatewayapi.RulesOf(p)
		if err != nil {
			return nil, err
		}
		out = append(out, &gatewayPolicy{policy: p, served: s, rules: rules})
	}
	slices.SortFunc(out, func(a, b *gatewayPolicy) int {
		return cmp.Or(cmp.Compare(a.served.Port, b.served.Port), cmp.Compare(a.served.Hostname, b.served.Hostname))
	})
	return out, nil
}

// hostLabel is a policy's host name as printed: "*" for every name no other policy of the port serves.
func hostLabel(h string) string { return cmp.Or(h, "*") }

// pickGatewayPolicy finds, among the policies of the Gateway gw, the one a request for host on port goes
// to (port 0: the Gateway's only port). notServed says why a Gateway has no policy at all, when it is
// known.
func pickGatewayPolicy(gw types.NamespacedName, ps []*gatewayPolicy, port int32, host string, notServed string) (*gatewayPolicy, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("gateway %s: lbplane serves no listener of it: %s", gw, cmp.Or(notServed,
			"no such Gateway, not of a GatewayClass with controllerName "+gatewayapi.ControllerName+", or none of its listeners is valid (see its status: kubectl get gateway -n "+gw.Namespace+" "+gw.Name+" -o yaml)"))
	}
	var ports []int32
	for _, p := range ps {
		if !slices.Contains(ports, p.served.Port) {
			ports = append(ports, p.served.Port)
		}
	}
	portList := strings.Join(mapStrings(ports, func(p int32) string { return strconv.Itoa(int(p)) }), ", ")
	if port == 0 {
		if len(ports) > 1 {
			return nil, fmt.Errorf("gateway %s listens on ports %s: name one in the request's URL (http://HOST:PORT/PATH)", gw, portList)
		}
		port = ports[0]
	}
	var names []string
	byName := map[string]*gatewayPolicy{}
	for _, p := range ps {
		if p.served.Port == port {
			names = append(names, p.served.Hostname)
			byName[p.served.Hostname] = p
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("port %d: gateway %s has no listener on port %d that lbplane serves (its ports: %s)", port, gw, port, portList)
	}
	h, ok := gatewayapi.HostFor(host, names)
	if !ok {
		if host == "" {
			return nil, fmt.Errorf("host: the request names none, and gateway %s serves only named hosts on port %d (%s): give one in the URL",
				gw, port, strings.Join(names, ", "))
		}
		return nil, fmt.Errorf("host %q: gateway %s does not serve it on port %d (its host names there: %s): Envoy answers 404",
			host, gw, port, strings.Join(mapStrings(names, hostLabel), ", "))
	}
	return byName[h], nil
}

func mapStrings[T any](in []T, f func(T) string) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// gatewayTrace is what a trace or preview of a Gateway's policy says of the Gateway.
type gatewayTrace struct {
	// Gateway is namespace/name; Port the listener port, and Hostname the host name of the port that
	// serves the request ("" for every name no other serves).
	Gateway   string   `json:"gateway"`
	Port      int32    `json:"port"`
	Hostname  string   `json:"hostname"`
	Listeners []string `json:"listeners,omitempty"`
	// Policy is the policy lbplane made of them (namespace/name).
	Policy string `json:"policy"`
	// Rule is the HTTPRoute rule the matched route was made of (trace); absent when no route matches or
	// nothing is attached to the host name (Envoy answers 404).
	Rule *gatewayapi.RuleRef `json:"rule,omitempty"`
}

func (p *gatewayPolicy) trace() *gatewayTrace {
	return &gatewayTrace{Gateway: p.served.Gateway.String(), Port: p.served.Port, Hostname: p.served.Hostname, Listeners: p.served.Listeners,
		Policy: objkey.Of(p.policy).String()}
}

// ruleAt is the HTTPRoute rule of route i of spec.routes; nil for none.
func (p *gatewayPolicy) ruleAt(i *int) *gatewayapi.RuleRef {
	if i == nil || *i < 0 || *i >= len(p.policy.Spec.Routes) {
		return nil
	}
	r, ok := p.rules[p.policy.Spec.Routes[*i].Name]
	if !ok {
		return nil
	}
	return &r
}

// header is the line that introduces a Gateway's policy.
func (g *gatewayTrace) header() string {
	listener := "listener"
	if len(g.Listeners) > 1 {
		listener = "listeners"
	}
	host := g.Hostname
	if host == "" {
		host = "* (any host name no other listener or route of the port names)"
	}
	return fmt.Sprintf("Gateway %s, %s %s (port %d), host name %s: policy %s", g.Gateway, listener, strings.Join(g.Listeners, ", "), g.Port, host, g.Policy)
}

// gatewayNotServed says, in Kubernetes mode, why lbplane serves nothing of the Gateway: it is not there,
// lbplane wrote no status on it (not its class), or what its status says. Empty when it cannot tell.
func gatewayNotServed(ctx context.Context, g *globals, gw types.NamespacedName) string {
	if !g.kube.enabled() {
		return ""
	}
	c, err := g.kube.connect()
	if err != nil {
		return ""
	}
	var obj gwv1.Gateway
	err = c.get(ctx, gatewayGVR, gw.Namespace, gw.Name, &obj)
	switch {
	case apierrors.IsNotFound(err):
		return "the cluster has no Gateway " + gw.String()
	case err != nil:
		return ""
	}
	accepted := meta.FindStatusCondition(obj.Status.Conditions, string(gwv1.GatewayConditionAccepted))
	if accepted == nil || accepted.ObservedGeneration == 0 && len(obj.Status.Listeners) == 0 {
		return fmt.Sprintf("lbplane wrote no status on it: is its GatewayClass %s one with controllerName %s?", obj.Spec.GatewayClassName, gatewayapi.ControllerName)
	}
	var why []string
	if accepted.Status != metav1.ConditionTrue {
		why = append(why, fmt.Sprintf("Accepted %s (%s): %s", accepted.Status, accepted.Reason, accepted.Message))
	}
	for _, l := range obj.Status.Listeners {
		for _, t := range []gwv1.ListenerConditionType{gwv1.ListenerConditionAccepted, gwv1.ListenerConditionResolvedRefs, gwv1.ListenerConditionProgrammed} {
			if c := meta.FindStatusCondition(l.Conditions, string(t)); c != nil && c.Status != metav1.ConditionTrue {
				why = append(why, fmt.Sprintf("listener %s: %s %s (%s): %s", l.Name, t, c.Status, c.Reason, c.Message))
				break
			}
		}
	}
	return strings.Join(why, "; ")
}

// offlineNotServed says why the files' Gateway gw became no policy.
func offlineNotServed(s *offlineSet, file string, gw types.NamespacedName) string {
	g, ok := s.objs.objects[objKey{"Gateway", gw.Namespace, gw.Name}].(*gwv1.Gateway)
	if !ok {
		return "no Gateway " + gw.String() + " in " + file
	}
	if s.gateways == nil {
		return ""
	}
	out, ok := s.gateways.Gateways[gw]
	if !ok {
		return fmt.Sprintf("its GatewayClass %s has controllerName other than %s", g.Spec.GatewayClassName, gatewayapi.ControllerName)
	}
	var why []string
	if c := meta.FindStatusCondition(out.Status.Conditions, string(gwv1.GatewayConditionAccepted)); c != nil && c.Status != metav1.ConditionTrue {
		why = append(why, fmt.Sprintf("Accepted %s (%s): %s", c.Status, c.Reason, c.Message))
	}
	for _, l := range out.Status.Listeners {
		for _, c := range l.Conditions {
			bad := c.Status != metav1.ConditionTrue
			if c.Type == string(gwv1.ListenerConditionConflicted) {
				bad = c.Status == metav1.ConditionTrue
			}
			if bad {
				why = append(why, fmt.Sprintf("listener %s: %s %s (%s): %s", l.Name, c.Type, c.Status, c.Reason, c.Message))
				break
			}
		}
	}
	return strings.Join(why, "; ")
}

// gatewayGVR is the resource of Gateways.
var gatewayGVR = gatewayResource("gateways")

// gatewayResource is a resource of Gateway API's v1.
func gatewayResource(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: resource}
}

// ruleText is " (HTTPRoute ...)" for a route made of a rule, "" otherwise.
func ruleText(r *gatewayapi.RuleRef) string {
	if r == nil {
		return ""
	}
	return " (" + r.String() + ")"
}

// gatewayPoliciesFor reads the policies of the Gateway gw: from the files' set, or else from the server;
// notServed says why there are none, when that is known.
func gatewayPoliciesFor(ctx context.Context, g *globals, set *offlineSet, file string, gw types.NamespacedName) ([]*gatewayPolicy, string, error) {
	var ps []*v1alpha1.LoadBalancerPolicy
	why := ""
	if set != nil {
		if ps = set.gatewayPolicies(gw); len(ps) == 0 {
			why = offlineNotServed(set, file, gw)
		}
	} else {
		c, err := g.client()
		if err != nil {
			return nil, "", err
		}
		if ps, err = c.GatewayPolicies(ctx, gw.Namespace, gw.Name); err != nil {
			return nil, "", err
		}
		if len(ps) == 0 {
			why = gatewayNotServed(ctx, g, gw)
		}
	}
	gps, err := gatewayPoliciesOf(ps)
	return gps, why, err
}

// gatewayTraceTarget finds the policy of the Gateway gw a request goes to: the URL's port and host (or the
// Gateway's only port and the request's Host header), and sets the request's path and Host from the URL.
func gatewayTraceTarget(cmd *cobra.Command, g *globals, set *offlineSet, file string, gw types.NamespacedName, urlArg []string, req trafficmodel.Request) (*gatewayPolicy, trafficmodel.Request, error) {
	var gr gatewayRequest
	hostHeader := ""
	if hs := req.Headers["host"]; len(hs) > 0 {
		hostHeader = hs[0]
	}
	if len(urlArg) == 1 {
		var err error
		if gr, err = parseRequestURL(urlArg[0]); err != nil {
			return nil, req, err
		}
		if gr.path != "" {
			if cmd.Flags().Changed("path") {
				return nil, req, fmt.Errorf("--path %s: the URL gives the path (%s)", req.Path, gr.path)
			}
			req.Path = gr.path
		}
		if hostHeader != "" && !strings.EqualFold(hostOnly(hostHeader), gr.host) {
			return nil, req, fmt.Errorf("--header host=%s: the URL names host %s", hostHeader, gr.host)
		}
		if hostHeader == "" {
			req.Headers["host"] = []string{gr.host}
		}
	} else {
		gr.host = strings.ToLower(hostOnly(hostHeader))
	}
	gps, why, err := gatewayPoliciesFor(cmd.Context(), g, set, file, gw)
	if err != nil {
		return nil, req, err
	}
	gp, err := pickGatewayPolicy(gw, gps, gr.port, gr.host, why)
	return gp, req, err
}

// hostOnly is a Host header's host name, without its port.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// servedText says what a Gateway's policy serves: "shop/web, listener http (port 80), host name *".
func servedText(s gatewayapi.Served) string {
	listener := "listener"
	if len(s.Listeners) != 1 {
		listener = "listeners"
	}
	return fmt.Sprintf("%s, %s %s (port %d), host name %s", s.Gateway, listener, strings.Join(s.Listeners, ", "), s.Port, hostLabel(s.Hostname))
}

// serverGatewayPolicies are the policies of the Gateway gw lbplane serves, or an error that says why it
// serves none.
func serverGatewayPolicies(ctx context.Context, g *globals, gw types.NamespacedName) ([]*gatewayPolicy, error) {
	gps, why, err := gatewayPoliciesFor(ctx, g, nil, "", gw)
	if err != nil {
		return nil, err
	}
	if len(gps) == 0 {
		_, err := pickGatewayPolicy(gw, nil, 0, "", why)
		return nil, err
	}
	return gps, nil
}

// getPolicy reads one policy from src; in Kubernetes mode, a policy that is not an object of the cluster
// is asked of lbplane, which serves policies of its own: those of Gateways.
func getPolicy(ctx context.Context, g *globals, src policySource, ns, name string) (*v1alpha1.LoadBalancerPolicy, error) {
	p, err := src.Get(ctx, ns, name)
	if err == nil || !g.kube.enabled() || !apierrors.IsNotFound(err) {
		return p, err
	}
	c, cerr := g.client()
	if cerr != nil {
		return nil, err
	}
	if p, serr := c.Get(ctx, ns, name); serr == nil {
		return p, nil
	}
	return nil, err
}

// gatewayStatus is lbctl status gateway/NAME: the status of each of the Gateway's policies.
func gatewayStatus(cmd *cobra.Command, g *globals, w *watchFlags, out *outputFlags, gw types.NamespacedName, perProxy bool) error {
	return w.run(cmd, out, func(ctx context.Context) (printable, error) {
		gps, err := serverGatewayPolicies(ctx, g, gw)
		if err != nil {
			return printable{}, err
		}
		c, err := g.client()
		if err != nil {
			return printable{}, err
		}
		items := make([]*v1alpha1.LoadBalancerPolicy, len(gps))
		names := make([]string, len(gps))
		for i, gp := range gps {
			items[i], names[i] = gp.policy, policyName(gp.policy.Name)
		}
		return printable{Object: policyList(items), Names: names, Text: func(w io.Writer, _ bool) error {
			for i, gp := range gps {
				if i > 0 {
					fmt.Fprintln(w)
				}
				if err := printStatusOf(ctx, w, c, gp.policy, perProxy); err != nil {
					return err
				}
			}
			return nil
		}}, nil
	})
}
