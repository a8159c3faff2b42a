package trafficmodel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Trace is the offline answer to "where does this request go, and why".
type Trace struct {
	Policy string `json:"policy"`
	// Route is the route matched; empty when none matches (Envoy answers 404).
	Route string `json:"route,omitempty"`
	// SpecRoute is the index of the route matched in the policy's spec.routes; absent when none matches,
	// or when the route was made of none (a policy without routes).
	SpecRoute *int `json:"specRoute,omitempty"`
	// Why the route matched, and why each earlier one did not.
	Why    []string `json:"why"`
	Missed []string `json:"missed,omitempty"`
	// Earlier are the routes Missed names, in order, as data: each route's name, its index in spec.routes
	// (see SpecRoute) and why it does not match.
	Earlier []MissedRoute `json:"earlier,omitempty"`
	// Backends is the weighted pick: Envoy chooses one per request, at random by weight.
	Backends []BackendPick `json:"backends,omitempty"`
	// Hash is the request's hash (hashing backends).
	Hash *HashTrace `json:"hash,omitempty"`
	// Session is the session persistence override, when the route has one.
	Session *SessionTrace `json:"session,omitempty"`
	// Envoys names the Envoys the chances are for, when a backend routes by the Envoy's zone.
	Envoys string `json:"envoys,omitempty"`
	// Answer is how Envoy answers the matched route itself (a redirect, a direct response): no backend.
	Answer string `json:"answer,omitempty"`
}

// MissedRoute is a route a request does not match.
type MissedRoute struct {
	Route     string   `json:"route"`
	SpecRoute *int     `json:"specRoute,omitempty"`
	Why       []string `json:"why"`
}

// BackendPick is one destination of the route and where the request lands in it.
type BackendPick struct {
	Backend     string  `json:"backend"`
	Cluster     string  `json:"cluster"`
	Weight      uint32  `json:"weight"`
	Probability float64 `json:"probability"`
	Algorithm   string  `json:"algorithm"`
	// Level is the priority level chosen (by the hash, or the level's share of load without one).
	Levels []*Level `json:"levels"`
	Level  *int     `json:"level,omitempty"`
	// Panic: the level balances over every endpoint, healthy or not.
	Panic      bool `json:"panic"`
	TotalPanic bool `json:"totalPanic"`
	// Owner is the endpoint a hashing backend sends this request to.
	Owner string `json:"owner,omitempty"`
	// Candidates are the endpoints a non-hashing backend spreads over, with their chance.
	Candidates []Candidate `json:"candidates,omitempty"`
	// Skipped are the endpoints out of load balancing, and why.
	Skipped []Host `json:"skipped,omitempty"`
	// Endpoint is where the request goes when it is certain: a hash owner or a session's endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// Note says what the model cannot know about this backend.
	Note string `json:"note,omitempty"`
	// Unpredictable says why Envoy's pick for this one request cannot be known offline; Candidates then
	// give the distribution it draws from.
	Unpredictable string `json:"unpredictable,omitempty"`
	// Caveats are Envoy behaviours the prediction leaves out (see Caveats).
	Caveats []string `json:"caveats,omitempty"`
	// ResolvedByEnvoy: the endpoints are host names, whose addresses only Envoy knows.
	ResolvedByEnvoy bool `json:"resolvedByEnvoy,omitempty"`
}

// Candidate is an endpoint and its chance of getting the request.
type Candidate struct {
	Address     string  `json:"address"`
	Probability float64 `json:"probability"`
}

// HashTrace is the request's hash and what went into it.
type HashTrace struct {
	Parts   []KeyPart `json:"parts"`
	Value   uint64    `json:"value"`
	Present bool      `json:"present"`
	// Generated: Envoy generates a hash cookie for this request, so its hash is not known offline.
	Generated bool `json:"generated,omitempty"`
}

// SessionTrace says whether a session cookie or header overrides load balancing.
type SessionTrace struct {
	Kind     string `json:"kind"` // cookie or header
	Name     string `json:"name"`
	Value    string `json:"value,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Applies  bool   `json:"applies"`
	// Draining: the session's endpoint is draining and keeps the session (it takes no new client).
	Draining bool   `json:"draining,omitempty"`
	Why      string `json:"why"`
}

// ErrorShareNote is what a trace says of a route's error share (backends that do not resolve): Envoy
// answers those requests 500 itself.
const ErrorShareNote = "Envoy answers this share 500: a backend of the route does not resolve"

// TraceRequest follows a request through the policy's routes and backends.
func (p *Policy) TraceRequest(r Request) *Trace {
	t := &Trace{Policy: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}.String(), Envoys: p.envoysNote()}
	var route *Route
	for _, rt := range p.Routes {
		if rt.Match == nil { // TCP: every connection
			route = rt
			t.Why = append(t.Why, "TCP listener: every connection takes its backends")
			break
		}
		ok, why := matchRoute(rt.Match, r)
		if ok {
			route = rt
			t.Why = why
			break
		}
		t.Missed = append(t.Missed, fmt.Sprintf("%s: %s", rt.Name, strings.Join(why, "; ")))
		mr := MissedRoute{Route: rt.Name, Why: why}
		if i, ok := p.SpecRoutes[rt.Name]; ok {
			mr.SpecRoute = &i
		}
		t.Earlier = append(t.Earlier, mr)
	}
	if route == nil {
		return t
	}
	t.Route = route.Name
	if i, ok := p.SpecRoutes[route.Name]; ok {
		t.SpecRoute = &i
	}
	if route.Answer != "" {
		t.Answer = route.Answer
		return t
	}
	h, present, parts := RequestHash(route.Hash, r)
	if len(route.Hash) > 0 {
		t.Hash = &HashTrace{Parts: parts, Value: h, Present: present}
		for _, p := range parts {
			t.Hash.Generated = t.Hash.Generated || (p.Generated && !present)
		}
	}
	var sessionEndpoint string
	if s := route.Session; s != nil {
		st := &SessionTrace{Kind: s.Kind, Name: s.Name}
		var v string
		var found bool
		if s.Kind == "header" {
			if vs := r.Header(s.Name); len(vs) > 0 {
				v, found = vs[0], true
			}
		} else {
			v, found = r.Cookie(s.Name)
		}
		switch {
		case !found:
			st.Why = "no session " + st.Kind + ": load balancing picks, and Envoy sets the " + st.Kind + " in the response"
		default:
			st.Value = v
			addr, err := DecodeSession(v)
			if err != nil {
				st.Why = "the " + st.Kind + " does not decode (" + err.Error() + "): load balancing picks"
				break
			}
			st.Endpoint = addr
			c, i := p.findHost(route, addr)
			switch {
			case c == nil:
				st.Why = "its endpoint " + addr + " is not in the backend: load balancing picks"
			case !c.KeepsSession(i) && c.Hosts[i].Reason == "draining":
				st.Why = "its endpoint " + addr + " is draining and the backend moves the sessions of draining endpoints (drainingSessions: Move): load balancing picks"
			case !c.KeepsSession(i):
				st.Why = "its endpoint " + addr + " is not healthy (" + c.Hosts[i].Reason + "): load balancing picks"
			case !c.Hosts[i].Healthy:
				st.Applies, st.Draining = true, true
				st.Why = "session -> draining endpoint " + addr + ", kept: the session stays on it until it leaves the backend, while new clients go to the others"
				sessionEndpoint = addr
			default:
				st.Applies, st.Why = true, "the session pins the request to "+addr
				sessionEndpoint = addr
			}
		}
		t.Session = st
	}
	var sum uint64
	for _, wc := range route.Clusters {
		sum += uint64(wc.Weight)
	}
	for _, wc := range route.Clusters {
		c := p.Clusters[wc.Name]
		if c == nil {
			t.Backends = append(t.Backends, BackendPick{Cluster: wc.Name, Weight: wc.Weight, Probability: float64(wc.Weight) / float64(sum),
				Note: ErrorShareNote})
			continue
		}
		bp := BackendPick{Backend: p.BackendOf[c.Name], Cluster: c.Name, Weight: wc.Weight,
			Probability: float64(wc.Weight) / float64(sum), Algorithm: string(c.Algorithm), Levels: c.Levels, TotalPanic: c.TotalPanic}
		for _, host := range c.Hosts {
			if !host.Healthy {
				bp.Skipped = append(bp.Skipped, host)
			}
		}
		switch {
		case sessionEndpoint != "" && c.HostIndex(sessionEndpoint) >= 0:
			bp.Endpoint = sessionEndpoint
		case c.ResolvedByEnvoy && c.Hashing() && present:
			// The ring holds the addresses the names resolve to, which only Envoy knows.
			bp.Note = ResolvedNote + ": which of their addresses owns this hash is decided there"
		case c.Hashing() && present:
			i, l := c.Owner(h)
			if l != nil {
				bp.Level, bp.Panic = &l.Priority, l.Panic
			}
			if i >= 0 {
				bp.Owner, bp.Endpoint = c.Hosts[i].Address, c.Hosts[i].Address
			}
		default:
			// No hash: the level is drawn at random by load, the endpoint by weight (or ring/table share).
			for i, s := range c.Shares() {
				if s > 0 {
					bp.Candidates = append(bp.Candidates, Candidate{Address: c.Hosts[i].Address, Probability: s})
				}
			}
			for _, l := range c.Levels {
				bp.Panic = bp.Panic || (l.Panic && l.Load > 0)
			}
			bp.Unpredictable = unpredictable(c, len(route.Hash) > 0)
		}
		bp.Caveats = Caveats(c)
		bp.ResolvedByEnvoy = c.ResolvedByEnvoy
		switch {
		case !c.ResolvedByEnvoy || bp.Note != "":
		case c.logicalDNS:
			bp.Note = ResolvedNote + ": Envoy connects to the first address of the latest answer"
		default:
			bp.Note = ResolvedNote + ": the shares below are the names', each split over its addresses"
		}
		t.Backends = append(t.Backends, bp)
	}
	return t
}

// unpredictable says why one request's endpoint is not known offline for a backend without a hash.
func unpredictable(c *Cluster, hashed bool) string {
	levels := 0
	for _, l := range c.Levels {
		if l.Load > 0 {
			levels++
		}
	}
	var why string
	switch c.Algorithm {
	case "RoundRobin":
		why = "round robin: this request's endpoint depends on the requests before it"
	case "LeastRequest":
		why = "least request: Envoy compares random endpoints' active requests; while requests do not overlap the spread follows the weights, under concurrent load the less busy get more"
	case "Random":
		why = "Envoy picks at random, ignoring weights"
	case "BackendUtilization":
		why = "the weights follow the utilization the endpoints report, which is not known offline"
	default:
		if hashed {
			why = "no hash input is in the request, so Envoy picks at random over the hash space"
		} else {
			why = "the route has no hash key, so Envoy picks at random over the hash space"
		}
	}
	if levels > 1 {
		why += "; the priority level is drawn at random by its load"
	}
	return why + ": the chances below are the distribution"
}

// findHost returns the cluster of the route that has the endpoint addr, and its index there (nil if none).
func (p *Policy) findHost(route *Route, addr string) (*Cluster, int) {
	for _, wc := range route.Clusters {
		c := p.Clusters[wc.Name]
		if c == nil {
			continue
		}
		if i := c.HostIndex(addr); i >= 0 {
			return c, i
		}
	}
	return nil, -1
}

// DecodeSession reads the endpoint from Envoy's stateful session value: base64 of "ip:port", of a JSON
// object with "address", or of the protobuf Envoy's cookie state uses (field 1: the address).
func DecodeSession(v string) (string, error) {
	var b []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("not base64")
	}
	if ap, err := netip.ParseAddrPort(string(b)); err == nil {
		return ap.String(), nil
	}
	var j struct {
		Address string `json:"address"`
	}
	if json.Unmarshal(b, &j) == nil && j.Address != "" {
		return j.Address, nil
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			s, m := protowire.ConsumeBytes(b)
			if m >= 0 {
				return string(s), nil
			}
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			break
		}
		b = b[m:]
	}
	return "", fmt.Errorf("no endpoint address in it")
}

// EncodeSession is the plain form of a session value for an endpoint, which Envoy accepts.
func EncodeSession(address string) string {
	return base64.StdEncoding.EncodeToString([]byte(address))
}

// matchRoute applies Envoy's route match as built: the path (without its query) by prefix, by whole
// segments, by a regular expression or exactly, then every header matcher and query parameter. It returns
// the reasons, for the trace.
func matchRoute(m *routev3.RouteMatch, req Request) (bool, []string) {
	path, query, _ := strings.Cut(req.Path, "?")
	if path == "" {
		path = "/"
	}
	var why []string
	switch {
	case m.GetPath() != "":
		if path != m.GetPath() {
			return false, []string{fmt.Sprintf("path %q is not exactly %q", path, m.GetPath())}
		}
		why = append(why, fmt.Sprintf("path %q is exactly %q", path, m.GetPath()))
	case m.GetPathSeparatedPrefix() != "":
		p := m.GetPathSeparatedPrefix()
		if path != p && !strings.HasPrefix(path, p+"/") {
			return false, []string{fmt.Sprintf("path %q is not %q or below it", path, p)}
		}
		why = append(why, fmt.Sprintf("path %q is %q or below it", path, p))
	case m.GetSafeRegex() != nil:
		re, err := regexp.Compile("^(?:" + m.GetSafeRegex().GetRegex() + ")$")
		if err != nil || !re.MatchString(path) {
			return false, []string{fmt.Sprintf("path %q does not match %q", path, m.GetSafeRegex().GetRegex())}
		}
		why = append(why, fmt.Sprintf("path %q matches %q", path, m.GetSafeRegex().GetRegex()))
	default:
		if !strings.HasPrefix(path, m.GetPrefix()) {
			return false, []string{fmt.Sprintf("path %q does not start with %q", path, m.GetPrefix())}
		}
		why = append(why, fmt.Sprintf("path %q starts with %q", path, m.GetPrefix()))
	}
	for _, h := range m.GetHeaders() {
		vs := req.Header(h.GetName())
		joined := strings.Join(vs, ",")
		var ok bool
		var desc string
		sm := h.GetStringMatch()
		switch {
		case h.GetPresentMatch():
			ok, desc = len(vs) > 0, "is present"
		case sm.GetPrefix() != "":
			ok, desc = len(vs) > 0 && strings.HasPrefix(joined, sm.GetPrefix()), fmt.Sprintf("starts with %q", sm.GetPrefix())
		case sm.GetSafeRegex() != nil:
			re, err := regexp.Compile("^(?:" + sm.GetSafeRegex().GetRegex() + ")$")
			ok, desc = err == nil && len(vs) > 0 && re.MatchString(joined), fmt.Sprintf("matches %q", sm.GetSafeRegex().GetRegex())
		default:
			ok, desc = len(vs) > 0 && joined == sm.GetExact(), fmt.Sprintf("is %q", sm.GetExact())
		}
		if h.GetInvertMatch() && (len(vs) > 0 || h.GetPresentMatch()) {
			// Envoy fails a header that is absent whatever the inversion, except for a presence match.
			ok, desc = !ok, "not "+desc
		}
		got := "absent"
		if len(vs) > 0 {
			got = fmt.Sprintf("%q", joined)
		}
		if !ok {
			return false, append(why, fmt.Sprintf("header %s (%s) fails: %s", h.GetName(), got, desc))
		}
		why = append(why, fmt.Sprintf("header %s (%s) %s", h.GetName(), got, desc))
	}
	values, _ := url.ParseQuery(query)
	for _, q := range m.GetQueryParameters() {
		// Envoy looks at the first value of a parameter only ("?v=1&v=2" is v=1).
		vs := values[q.GetName()]
		ok := len(vs) > 0
		if ok {
			if re := q.GetStringMatch().GetSafeRegex(); re != nil {
				r, err := regexp.Compile("^(?:" + re.GetRegex() + ")$")
				ok = err == nil && r.MatchString(vs[0])
			} else {
				ok = vs[0] == q.GetStringMatch().GetExact()
			}
		}
		if !ok {
			return false, append(why, fmt.Sprintf("query parameter %s fails: %v", q.GetName(), vs))
		}
		why = append(why, fmt.Sprintf("query parameter %s (%s) matches", q.GetName(), vs[0]))
	}
	return true, why
}

// ResolvedNote is what the model says of a DNS backend's endpoints.
const ResolvedNote = "the endpoints are host names Envoy resolves at run time"
