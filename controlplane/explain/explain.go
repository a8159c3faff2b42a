// Package explain traces one policy through the pipeline: its fields (with defaults), the IR it became, and
// the Envoy resources and fields each policy field set.
package explain

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// Lookup returns one resource of a proxy group as it is built, by type URL and name; nil when there is
// none. The message is not modified.
type Lookup func(group, typeURL, name string) proto.Message

// Policy explains p, whose translation is pr within res: what lbctl explain and the push API's explain call
// show. built looks up the resources of the policy's proxy group as they are served (the engine's current
// state); nil builds the few the policy has from the IR (lbctl explain -f).
func Policy(p *v1alpha1.LoadBalancerPolicy, pr *translate.PolicyResult, res *translate.Result, built Lookup) (*Explanation, error) {
	dp, _ := translate.Prepare(p, reach.Rules{})
	g := res.IR.Groups[dp.Spec.ProxyGroup]
	return Explain(dp, pr, g, built)
}

// FromIR looks resources up by building them from the group's IR, one at a time, as xdsbuild.Build would.
func FromIR(g *ir.Group) Lookup {
	return func(_, typ, name string) proto.Message {
		if g == nil {
			return nil
		}
		switch typ {
		case resource.ListenerType, resource.RouteType:
			scoped := g.ScopedPort()
			for _, l := range g.Listeners {
				switch {
				case typ == resource.ListenerType && l.Name == name && scoped != 0 && l.Port == scoped:
					return xdsbuild.ScopedListener(l)
				case typ == resource.ListenerType && l.Name == name:
					return xdsbuild.Listener(l)
				case l.Protocol != ir.HTTP:
				case scoped == 0 || l.Port != scoped:
					if l.RouteConfigName() == name {
						return xdsbuild.RouteConfig(l)
					}
				default:
					for _, vh := range l.VirtualHosts {
						if l.HostRouteConfigName(vh) == name && !vh.ImpliedByScopes() {
							return xdsbuild.HostRouteConfig(l, vh)
						}
					}
				}
			}
		case resource.ClusterType, resource.EndpointType:
			i, ok := slices.BinarySearchFunc(g.Clusters, name, func(c *ir.Cluster, n string) int { return strings.Compare(c.Name, n) })
			switch {
			case !ok:
			case typ == resource.ClusterType:
				return xdsbuild.Cluster(g.Clusters[i])
			case g.Clusters[i].DNS == nil:
				return xdsbuild.LoadAssignment(g.Clusters[i])
			}
		}
		return nil
	}
}

// Explanation is one policy's way through the pipeline.
type Explanation struct {
	Policy     string `json:"policy"`
	ProxyGroup string `json:"proxyGroup"`
	Accepted   bool   `json:"accepted"`
	Message    string `json:"message,omitempty"`
	// IR holds the policy's part of the intermediate representation.
	IR IR `json:"ir"`
	// Resources are the Envoy resources the policy contributes to.
	Resources []Resource `json:"resources"`
	// Fields maps every policy field (defaults included) to the Envoy field it became.
	Fields []Field `json:"fields"`
}

// IR is the policy's share of its proxy group's IR.
type IR struct {
	Listener    *ir.Listener    `json:"listener,omitempty"`
	VirtualHost *ir.VirtualHost `json:"virtualHost,omitempty"`
	Clusters    []*ir.Cluster   `json:"clusters,omitempty"`
}

// Resource names one Envoy resource.
type Resource struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// Field is one policy field and where it went.
type Field struct {
	Policy string `json:"policy"`
	Value  string `json:"value"`
	// Resource and Envoy name the resource and field; Envoy is empty for fields with no Envoy counterpart
	// (Note says why).
	Resource   *Resource `json:"resource,omitempty"`
	Envoy      string    `json:"envoy,omitempty"`
	EnvoyValue string    `json:"envoyValue,omitempty"`
	Note       string    `json:"note,omitempty"`
}

// Explain traces p, which must be defaulted (translate.Prepare), through r, its group's IR g and the
// resources built from g, which built looks up (nil: FromIR(g)). Only the policy's own resources are
// read: its share of the IR (by ir.Source) names them. g is nil when the policy was not accepted.
func Explain(p *v1alpha1.LoadBalancerPolicy, r *translate.PolicyResult, g *ir.Group, built Lookup) (*Explanation, error) {
	e := &Explanation{Policy: objkey.Of(p).String(), ProxyGroup: p.Spec.ProxyGroup, Accepted: r.Accepted && r.ResolvedRefs}
	if !r.Accepted {
		e.Message = r.AcceptedMessage
	} else if !r.ResolvedRefs {
		e.Message = r.ResolvedRefsMessage
	}
	if built == nil {
		built = FromIR(g)
	}
	trees := map[string]map[string]any{}
	if g != nil && e.Accepted {
		e.IR = irOf(r, g)
		var err error
		if trees, err = resourceTrees(e.IR, func(typ, name string) proto.Message { return built(g.Name, typ, name) }); err != nil {
			return nil, err
		}
		for _, typ := range []string{Listener, Routes, Cluster, Endpoints} {
			for _, name := range slices.Sorted(maps.Keys(trees[typ])) {
				e.Resources = append(e.Resources, Resource{Type: typ, Name: name})
			}
		}
	}
	spec, err := toTree(p.Spec)
	if err != nil {
		return nil, err
	}
	var leaves []leaf
	walkLeaves("spec", spec, &leaves)
	type matched struct {
		ru   rule
		vars map[string]string
		ok   bool
	}
	matches := make([]matched, len(leaves))
	// The Envoy fields that fields set to true leave out, with what is under them.
	type leftOut struct{ typ, name, path, field string }
	var offs []leftOut
	for i, l := range leaves {
		ru, vars, ok := match(l.path, p, e.IR)
		if ok {
			ru = present(ru, trees)
		}
		matches[i] = matched{ru, vars, ok}
		if ok && ru.off && l.value == true {
			typ, paths := inCluster(trees, ru.typ, expand(ru.name, vars), expand(ru.path, vars))
			for _, path := range strings.Split(paths, "|") {
				offs = append(offs, leftOut{typ, expand(ru.name, vars), path, l.path})
			}
		}
	}
	offBy := func(typ, name, paths string) string {
		for _, o := range offs {
			for _, path := range strings.Split(paths, "|") {
				if o.typ == typ && o.name == name && (path == o.path || strings.HasPrefix(path, o.path+".")) {
					return o.field
				}
			}
		}
		return ""
	}
	for i, l := range leaves {
		f := Field{Policy: l.path, Value: render(l.value)}
		ru, vars, ok := matches[i].ru, matches[i].vars, matches[i].ok
		switch {
		case !ok:
			f.Note = "no Envoy field of its own"
		case ru.none != "":
			f.Note = ru.none
		case !e.Accepted:
			f.Note = "not in Envoy: the policy is not served"
		case resolvedByLbplane(trees, ru.typ, expand(ru.name, vars), ru.path):
			f.Note = "lbplane resolves the backend's names with it; Envoy gets the answers as endpoints (EDS)"
		default:
			typ, paths := inCluster(trees, ru.typ, expand(ru.name, vars), expand(ru.path, vars))
			f.Resource = &Resource{Type: typ}
			name, path, got := resolveIn(trees[typ], expand(ru.name, vars), paths)
			f.Resource.Name, f.Envoy = name, path
			by, answer := "", ""
			if got == nil {
				by = offBy(typ, f.Resource.Name, paths)
				answer = answeredBy(trees[typ], f.Resource.Name, paths)
			}
			switch {
			case got != nil:
				f.EnvoyValue = render(got)
			case by != "":
				f.EnvoyValue = "(left out: " + by + " is true)"
			case answer != "":
				f.EnvoyValue = "(left out: the route answers with " + answer + ", not a backend)"
			case ru.optional:
				f.EnvoyValue = "(unset: Envoy's default)"
			default:
				f.EnvoyValue = "(not found)"
			}
		}
		e.Fields = append(e.Fields, f)
	}
	return e, nil
}

func irOf(r *translate.PolicyResult, g *ir.Group) IR {
	var out IR
	// Translation records on each IR object the policy it came from: that, not a resource's name, says
	// what is this policy's.
	mine := func(s ir.Source) bool { return s.Namespace == r.Key.Namespace && s.Name == r.Key.Name }
	for _, l := range g.Listeners {
		if !slices.ContainsFunc(g.Owners(ir.KindListener, l.Name), func(o ir.Owner) bool { return mine(o.Source) }) {
			continue
		}
		// Only this policy's virtual host: the others on a shared port belong to other policies.
		c := *l
		c.VirtualHosts = nil
		out.Listener = &c
		for _, vh := range l.VirtualHosts {
			if mine(vh.Source) {
				out.VirtualHost = vh
			}
		}
	}
	for _, c := range g.Clusters {
		if _, used := g.ClusterSource(c, r.Key.Namespace, r.Key.Name); used {
			out.Clusters = append(out.Clusters, c)
		}
	}
	return out
}

// resourceTrees reads the resources made of the policy's share of the IR, as JSON trees by short type and
// name: its listener, its route table (the port's, or its own on a port served as scoped routes; only its
// virtual host is kept), and its clusters with their endpoints.
func resourceTrees(x IR, built func(typ, name string) proto.Message) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	add := func(short string, m proto.Message) error {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if out[short] == nil {
			out[short] = map[string]any{}
		}
		out[short][cachev3.GetResourceName(m.(types.Resource))] = v
		return nil
	}
	var errs []error
	if l := x.Listener; l != nil {
		if m := built(resource.ListenerType, l.Name); m != nil {
			errs = append(errs, add(Listener, m))
		}
		if vh := x.VirtualHost; vh != nil {
			m := built(resource.RouteType, l.RouteConfigName())
			if m == nil {
				m = built(resource.RouteType, l.HostRouteConfigName(vh))
			}
			if rc, ok := m.(*routev3.RouteConfiguration); ok {
				// The other policies' hosts on the port are theirs.
				mine := &routev3.RouteConfiguration{Name: rc.GetName()}
				for _, v := range rc.GetVirtualHosts() {
					if v.GetName() == vh.Name {
						mine.VirtualHosts = append(mine.VirtualHosts, v)
					}
				}
				errs = append(errs, add(Routes, mine))
			}
		}
	}
	for _, c := range x.Clusters {
		if m := built(resource.ClusterType, c.Name); m != nil {
			errs = append(errs, add(Cluster, m))
		}
		if m := built(resource.EndpointType, c.Name); m != nil {
			errs = append(errs, add(Endpoints, m))
		}
	}
	return out, errors.Join(errs...)
}

func toTree(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

type leaf struct {
	path  string
	value any
}

// walkLeaves lists scalars, lists of scalars and the empty objects a rule maps; objects and lists of objects
// are descended into.
func walkLeaves(path string, v any, out *[]leaf) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			// An object set for its presence alone (a hash key's sourceIP: {}) is a field too, where a rule
			// maps it.
			if k, _ := fieldKey(path); ruleIndex(k) >= 0 {
				*out = append(*out, leaf{path, v})
			}
			return
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			walkLeaves(path+"."+k, x[k], out)
		}
	case []any:
		objects := len(x) > 0
		for _, e := range x {
			if _, ok := e.(map[string]any); !ok {
				objects = false
			}
		}
		if !objects {
			*out = append(*out, leaf{path, v})
			return
		}
		for i, e := range x {
			walkLeaves(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		*out = append(*out, leaf{path, v})
	}
}

// fieldKey normalises a field path for the rules: the index of spec.backends[N] becomes [b], of its
// .endpoints[N] [e], of spec.routes[N] [r], and any other index []. It returns those indexes too.
func fieldKey(path string) (string, map[string]int) {
	var b strings.Builder
	idx := map[string]int{}
	for {
		open := strings.IndexByte(path, '[')
		if open < 0 {
			b.WriteString(path)
			return b.String(), idx
		}
		end := strings.IndexByte(path[open:], ']')
		if end < 0 {
			b.WriteString(path)
			return b.String(), idx
		}
		end += open
		head := path[:open]
		n, err := strconv.Atoi(path[open+1 : end])
		b.WriteString(head)
		sofar := b.String()
		switch {
		case err != nil:
			b.WriteString(path[open : end+1])
		case sofar == "spec.backends":
			b.WriteString("[b]")
			idx["b"] = n
		case sofar == "spec.backends[b].endpoints":
			b.WriteString("[e]")
			idx["e"] = n
		case sofar == "spec.routes":
			b.WriteString("[r]")
			idx["r"] = n
		default:
			b.WriteString("[]")
		}
		path = path[end+1:]
	}
}

// match finds the rule of a policy field, and the names of the resources and objects it went to: those of
// the IR objects whose source is the field's backend or route (x is the policy's share of the IR), not
// names rebuilt the way translation makes them.
func match(path string, p *v1alpha1.LoadBalancerPolicy, x IR) (rule, map[string]string, bool) {
	key, idx := fieldKey(path)
	i := ruleIndex(key)
	if i < 0 {
		return rule{}, nil, false
	}
	vars := map[string]string{}
	if x.Listener != nil {
		vars["listener"] = x.Listener.Name
	}
	if x.VirtualHost != nil {
		vars["vhost"] = x.VirtualHost.Name
	}
	if n, ok := idx["b"]; ok && n < len(p.Spec.Backends) {
		vars["backend"] = p.Spec.Backends[n].Name
		for _, c := range x.Clusters {
			if c.Source.Backend == vars["backend"] {
				vars["cluster"] = c.Name
			}
		}
	}
	if n, ok := idx["r"]; ok && n < len(p.Spec.Routes) && x.VirtualHost != nil {
		for _, rt := range x.VirtualHost.Routes {
			if rt.Source.Route != nil && *rt.Source.Route == n {
				vars["route"] = rt.Name
			}
		}
	}
	if n, ok := idx["e"]; ok && vars["backend"] != "" {
		if b := backendNamed(p, vars["backend"]); b != nil && n < len(b.Endpoints) {
			vars["ep"] = fmt.Sprintf("%s:%d", b.Endpoints[n].Address, b.Endpoints[n].Port)
		}
	}
	return rules[i], vars, true
}

// answeredBy tells, for paths into a built route that were not found, whether that route is one Envoy
// answers itself ("a redirect", "a direct response"): it has no route action, and what would go there or
// beside it for the backends (timeouts, retries, sessions, rate limits) is left out. Empty otherwise. The
// resources are looked in as resolveIn does: the named one, or each when name is empty.
func answeredBy(byName map[string]any, name, paths string) string {
	names := []string{name}
	if name == "" {
		names = slices.Sorted(maps.Keys(byName))
	}
	for _, n := range names {
		if a := answeredIn(byName[n], paths); a != "" {
			return a
		}
	}
	return ""
}

func answeredIn(tree any, paths string) string {
	for _, p := range strings.Split(paths, "|") {
		i := strings.Index(p, ".routes[name=")
		if i < 0 {
			continue
		}
		end := i + strings.IndexByte(p[i:], ']') + 1
		if rest := strings.TrimPrefix(p[end:], "."); slices.ContainsFunc([]string{"name", "match", "redirect", "direct_response"},
			func(own string) bool { return rest == own || strings.HasPrefix(rest, own+".") }) {
			continue
		}
		built, _ := resolve(tree, p[:end]).(map[string]any)
		switch {
		case built["redirect"] != nil:
			return "a redirect"
		case built["direct_response"] != nil:
			return "a direct response"
		}
	}
	return ""
}

// present returns, of the rules written for ru's field (in order), the first whose resource type the policy
// has: a TCP listener's hash keys are its tcp_proxy's, not a route's.
func present(ru rule, trees map[string]map[string]any) rule {
	for _, alt := range rules {
		if alt.field == ru.field && alt.typ != "" && len(trees[alt.typ]) > 0 {
			return alt
		}
	}
	return ru
}

// ruleIndex returns the index of the rule of a field path normalised by fieldKey, or -1.
func ruleIndex(key string) int {
	return slices.IndexFunc(rules, func(ru rule) bool { return ru.matches(key) })
}

func backendNamed(p *v1alpha1.LoadBalancerPolicy, name string) *v1alpha1.Backend {
	for i := range p.Spec.Backends {
		if p.Spec.Backends[i].Name == name {
			return &p.Spec.Backends[i]
		}
	}
	return nil
}

func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// resolveIn looks paths up in the named resource, or in each resource of the type when name is empty, and
// returns the resource and the path that matched (the first of "a|b" when none did).
func resolveIn(byName map[string]any, name, paths string) (string, string, any) {
	names := []string{name}
	if name == "" {
		names = slices.Sorted(maps.Keys(byName))
	}
	for _, n := range names {
		for _, p := range strings.Split(paths, "|") {
			if v := resolve(byName[n], p); v != nil {
				return n, p, v
			}
		}
	}
	first, _, _ := strings.Cut(paths, "|")
	return name, first, nil
}

// resolve follows a path; "[*]" and "*" collect every element, and a collection with nothing in it is nil.
func resolve(tree any, path string) any {
	if tree == nil {
		return nil
	}
	if path == "" {
		return tree
	}
	seg, rest := splitPath(path)
	key, sel, hasSel := strings.Cut(seg, "[")
	var next []any
	if key == "*" {
		if m, ok := tree.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				next = append(next, m[k])
			}
		}
		return collect(next, rest)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil
	}
	v, ok := m[key]
	if !ok {
		return nil
	}
	if !hasSel {
		return resolve(v, rest)
	}
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	sel = strings.TrimSuffix(sel, "]")
	switch {
	case sel == "*":
		return collect(list, rest)
	case strings.HasPrefix(sel, "ep="):
		// The lb_endpoint whose address is ip:port, or the first one lbplane resolved from the name of name:port.
		for _, e := range list {
			sa, _ := resolve(e, "endpoint.address.socket_address").(map[string]any)
			want := strings.TrimPrefix(sel, "ep=")
			if sa != nil && (fmt.Sprintf("%v:%v", sa["address"], sa["port_value"]) == want ||
				fmt.Sprintf("%v:%v", resolve(e, "endpoint.hostname"), sa["port_value"]) == want) {
				return resolve(e, rest)
			}
		}
		return nil
	case strings.HasPrefix(sel, "name="):
		for _, e := range list {
			if o, ok := e.(map[string]any); ok && o["name"] == strings.TrimPrefix(sel, "name=") {
				return resolve(e, rest)
			}
		}
		return nil
	default:
		i, err := strconv.Atoi(sel)
		if err != nil || i < 0 || i >= len(list) {
			return nil
		}
		return resolve(list[i], rest)
	}
}

func collect(list []any, rest string) any {
	var out []any
	for _, e := range list {
		v := resolve(e, rest)
		if sub, ok := v.([]any); ok && strings.Contains(rest, "*") {
			out = append(out, sub...)
		} else if v != nil {
			out = append(out, v)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0] // a selection that found one element, as for an endpoint picked by address
	}
	return out
}

// splitPath cuts the first segment off; dots inside brackets do not split.
func splitPath(path string) (string, string) {
	depth := 0
	for i, c := range path {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				return path[:i], path[i+1:]
			}
		}
	}
	return path, ""
}

func render(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
