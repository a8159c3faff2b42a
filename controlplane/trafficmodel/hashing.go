// Package trafficmodel predicts where Envoy sends traffic for the resources lbplane builds: the share of
// requests each endpoint gets, the endpoint that owns a hash key, the priority level and panic mode for a
// given health, and how many keys move when the config changes. It reads the Cluster,
// ClusterLoadAssignment, Route and TCP proxy protos xdsbuild produces (never the policy), and follows Envoy's
// own algorithms on them (ring hash, Maglev, priority load with the assignment's overprovisioning factor,
// locality weights, the panic threshold), re-implemented from their description, so that
// `lbctl diff --traffic`, `lbctl trace`, `lbctl whatif` and the expected shares in status answer before
// anything is applied. It is pure: no I/O, no clock.
package trafficmodel

import (
	"math/bits"
	"regexp"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Request is what a hash policy and a route match read from a request.
type Request struct {
	// Path with its query string.
	Path string
	// Headers by lower-case name; a name may repeat. "host" is the request's Host (":authority").
	Headers  map[string][]string
	ClientIP string
}

// Header returns the values of a header, by any case of its name. ":path" is the path with its query, and
// ":authority" the Host header, as Envoy holds them.
func (r Request) Header(name string) []string {
	switch n := strings.ToLower(name); n {
	case ":path":
		if r.Path == "" {
			return []string{"/"}
		}
		return []string{r.Path}
	case ":method":
		// A traced request is a GET unless it says otherwise (a ":method" header).
		if v := r.Headers[":method"]; len(v) > 0 {
			return v
		}
		return []string{"GET"}
	case ":authority", "host":
		if v := r.Headers[":authority"]; len(v) > 0 {
			return v
		}
		return r.Headers["host"]
	default:
		return r.Headers[n]
	}
}

// Cookie returns the value of a cookie from the Cookie headers, as Envoy parses them (first match wins).
func (r Request) Cookie(name string) (string, bool) {
	for _, h := range r.Header("cookie") {
		for _, part := range strings.Split(h, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if ok && k == name {
				return strings.Trim(v, `"`), true
			}
		}
	}
	return "", false
}

// KeyPart is one hash policy's contribution to a request's hash.
type KeyPart struct {
	// Source names the input, e.g. "header x-user", "source IP", "path (without the query)".
	Source string `json:"source"`
	// Value is what was hashed; empty with Missing.
	Value   string `json:"value,omitempty"`
	Missing bool   `json:"missing,omitempty"`
	// Generated: the cookie is absent and Envoy generates it (from the client's and its own address,
	// which the model does not know): the hash is unknown offline, and stable once the client sends it.
	Generated bool   `json:"generated,omitempty"`
	Hash      uint64 `json:"hash,omitempty"`
}

// headerSource names a hashed header as users write it.
func headerSource(h *routev3.RouteAction_HashPolicy_Header) string {
	switch strings.ToLower(h.GetHeaderName()) {
	case ":path":
		if h.GetRegexRewrite() != nil {
			return "path (without the query)"
		}
		return "path (with the query)"
	case ":authority", "host":
		return "host"
	}
	return "header " + h.GetHeaderName()
}

// substGroup is a capture group in an Envoy substitution (\1), which Go writes ${1}.
var substGroup = regexp.MustCompile(`\\(\d)`)

// RequestHash computes the hash Envoy's route hash policy gives a request: each present input is hashed
// with xxHash64 (seed 0) and folded in by rotating the previous value left one bit and XOR-ing, a terminal
// input that produced a hash ends the walk. ok is false when no input is present: Envoy then picks at random,
// unless a cookie it generates is among the inputs (see KeyPart.Generated).
func RequestHash(policies []*routev3.RouteAction_HashPolicy, r Request) (hash uint64, ok bool, parts []KeyPart) {
	for _, hp := range policies {
		var p KeyPart
		var value string
		var present bool
		switch {
		case hp.GetConnectionProperties() != nil:
			if !hp.GetConnectionProperties().GetSourceIp() {
				continue
			}
			p.Source = "source IP"
			value, present = r.ClientIP, r.ClientIP != ""
		case hp.GetHeader() != nil:
			h := hp.GetHeader()
			p.Source = headerSource(h)
			vs := r.Header(h.GetHeaderName())
			if len(vs) == 0 {
				break
			}
			if rw := h.GetRegexRewrite(); rw != nil {
				re, err := regexp.Compile(rw.GetPattern().GetRegex())
				if err == nil {
					subst := substGroup.ReplaceAllString(rw.GetSubstitution(), `$${${1}}`)
					vs = slices.Clone(vs)
					for i, v := range vs {
						vs[i] = re.ReplaceAllString(v, subst)
					}
				}
			}
			// Envoy sorts repeated values so that their order does not matter, then chains them.
			vs = slices.Sorted(slices.Values(vs))
			var hv uint64
			for _, v := range vs {
				hv = xxhash64Seed(v, hv)
			}
			p.Value, p.Hash = strings.Join(vs, ","), hv
			parts = append(parts, p)
			hash, ok = fold(hash, ok, hv)
			if hp.GetTerminal() {
				return hash, ok, parts
			}
			continue
		case hp.GetQueryParameter() != nil:
			name := hp.GetQueryParameter().GetName()
			p.Source = "query parameter " + name
			// Envoy splits the query on & and = without decoding, and takes the first occurrence.
			if _, q, found := strings.Cut(r.Path, "?"); found {
				q, _, _ = strings.Cut(q, "#")
				for _, kv := range strings.Split(q, "&") {
					if n, v, _ := strings.Cut(kv, "="); n == name {
						value, present = v, true
						break
					}
				}
			}
		case hp.GetCookie() != nil:
			c := hp.GetCookie()
			p.Source = "cookie " + c.GetName()
			value, present = r.Cookie(c.GetName())
			present = present && value != ""
			if !present && c.GetTtl() != nil {
				// Envoy sets the cookie to a hash of the connection's two addresses and hashes that.
				p.Generated = true
			}
		default:
			continue
		}
		if !present {
			p.Missing = true
			parts = append(parts, p)
			continue
		}
		p.Value, p.Hash = value, xxhash.Sum64String(value)
		parts = append(parts, p)
		hash, ok = fold(hash, ok, p.Hash)
		if hp.GetTerminal() {
			break
		}
	}
	return hash, ok, parts
}

func fold(prev uint64, have bool, h uint64) (uint64, bool) {
	if !have {
		return h, true
	}
	return bits.RotateLeft64(prev, 1) ^ h, true
}

// xxhash64Seed is XXH64 with a seed: Envoy chains header values and seeds Maglev's skip with 1.
func xxhash64Seed(s string, seed uint64) uint64 {
	if seed == 0 {
		return xxhash.Sum64String(s)
	}
	d := xxhash.NewWithSeed(seed)
	d.WriteString(s)
	return d.Sum64()
}
