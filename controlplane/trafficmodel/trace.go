package trafficmodel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Trace is the offline answer to "where does this request go, and why".
type Trace struct {
	Policy string `json:"policy"`
	// Route is the route matched; empty when none matches (Envoy answers 404).
	Route string `json:"route,omitempty"`
	// Why the route matched, and why each earlier one did not.
	Why    []string `json:"why"`
	Missed []string `json:"missed,omitempty"`
	// Backends is the weighted pick: Envoy chooses one per request, at random by weight.
	Backends []BackendPick `json:"backends,omitempty"`
	// Hash is the request's hash (hashing backends).
	Hash *HashTrace `json:"hash,omitempty"`
	// Session is the session persistence override, when the route has one.
	Session *SessionTrace `json:"session,omitempty"`
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
	Why      string `json:"why"`
}

// TraceRequest follows a request through the policy's routes and backends.
func (p *Policy) TraceRequest(r Request) *Trace {
	t := &Trace{Policy: p.Namespace + "/" + p.Name}
	var route *Route
	for _, rt := range p.Routes {
		if rt.IR == nil { // TCP: every connection
			route = rt
			t.Why = append(t.Why, "TCP listener: every connection takes its backends")
			break
		}
		ok, why := matchRoute(rt.IR, r)
		if ok {
			route = rt
			t.Why = why
			break
		}
		t.Missed = append(t.Missed, fmt.Sprintf("%s: %s", rt.Name, strings.Join(why, "; ")))
	}
	if route == nil {
		return t
	}
	t.Route = route.Name
	h, present, parts := RequestHash(route.HashKeys, r)
	if len(route.HashKeys) > 0 {
		t.Hash = &HashTrace{Parts: parts, Value: h, Present: present}
		for _, p := range parts {
			t.Hash.Generated = t.Hash.Generated || (p.Generated && !present)
		}
	}
	var sessionEndpoint string
	if s := route.Session; s != nil {
		st := &SessionTrace{Kind: "cookie", Name: s.Cookie}
		var v string
		var found bool
		if s.Header != "" {
			st.Kind, st.Name = "header", s.Header
			if vs := r.Header(s.Header); len(vs) > 0 {
				v, found = vs[0], true
			}
		} else {
			v, found = r.Cookie(s.Cookie)
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
			host, healthy := p.findHost(route, addr)
			switch {
			case host == nil:
				st.Why = "its endpoint " + addr + " is not in the backend: load balancing picks"
			case !healthy:
				st.Why = "its endpoint " + addr + " is not healthy: load balancing picks"
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
		}
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

func (p *Policy) findHost(route *Route, addr string) (*Host, bool) {
	for _, wc := range route.Clusters {
		c := p.Clusters[wc.Name]
		if i := c.HostIndex(addr); i >= 0 {
			return &c.Hosts[i], c.Hosts[i].Healthy
		}
	}
	return nil, false
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

// matchRoute applies Envoy's route match: the path (without its query) by prefix or exactly, then every
// header matcher. It returns the reasons, for the trace.
func matchRoute(r *ir.Route, req Request) (bool, []string) {
	path, _, _ := strings.Cut(req.Path, "?")
	if path == "" {
		path = "/"
	}
	var why []string
	if r.PathType == ir.PathExact {
		if path != r.Path {
			return false, []string{fmt.Sprintf("path %q is not exactly %q", path, r.Path)}
		}
		why = append(why, fmt.Sprintf("path %q is exactly %q", path, r.Path))
	} else {
		if !strings.HasPrefix(path, r.Path) {
			return false, []string{fmt.Sprintf("path %q does not start with %q", path, r.Path)}
		}
		why = append(why, fmt.Sprintf("path %q starts with %q", path, r.Path))
	}
	for _, h := range r.Headers {
		vs := req.Header(h.Name)
		joined := strings.Join(vs, ",")
		var ok bool
		var desc string
		switch h.Type {
		case ir.HeaderPresent:
			ok, desc = len(vs) > 0, "is present"
		case ir.HeaderPrefix:
			ok, desc = len(vs) > 0 && strings.HasPrefix(joined, h.Value), fmt.Sprintf("starts with %q", h.Value)
		case ir.HeaderRegex:
			re, err := regexp.Compile("^(?:" + h.Value + ")$")
			ok, desc = err == nil && len(vs) > 0 && re.MatchString(joined), fmt.Sprintf("matches %q", h.Value)
		default:
			ok, desc = len(vs) > 0 && joined == h.Value, fmt.Sprintf("is %q", h.Value)
		}
		if h.Invert && (len(vs) > 0 || h.Type == ir.HeaderPresent) {
			// Envoy fails a header that is absent whatever the inversion, except for a presence match.
			ok, desc = !ok, "not "+desc
		}
		got := "absent"
		if len(vs) > 0 {
			got = fmt.Sprintf("%q", joined)
		}
		if !ok {
			return false, append(why, fmt.Sprintf("header %s (%s) fails: %s", h.Name, got, desc))
		}
		why = append(why, fmt.Sprintf("header %s (%s) %s", h.Name, got, desc))
	}
	return true, why
}

// ResolvedNote is what the model says of a DNS backend's endpoints.
const ResolvedNote = "the endpoints are host names Envoy resolves at run time"
