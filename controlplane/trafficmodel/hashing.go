// Package trafficmodel predicts where Envoy sends traffic for the IR lbplane builds: the share of requests
// each endpoint gets, the endpoint that owns a hash key, the priority level and panic mode for a given
// health, and how many keys move when the config changes. It follows Envoy's own algorithms (ring hash,
// Maglev, priority load with the 1.4 overprovisioning factor, panic threshold), re-implemented from their
// description, so that `lbctl diff --traffic`, `lbctl trace` and `lbctl whatif` answer before anything is
// applied. It is pure: no I/O, no clock.
package trafficmodel

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Request is what a hash policy and a route match read from a request.
type Request struct {
	Path string
	// Headers by lower-case name; a name may repeat.
	Headers  map[string][]string
	ClientIP string
}

// Header returns the values of a header, by any case of its name.
func (r Request) Header(name string) []string { return r.Headers[strings.ToLower(name)] }

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
	// Source names the input, e.g. "header x-user", "source IP".
	Source string `json:"source"`
	// Value is what was hashed; empty with Missing.
	Value   string `json:"value,omitempty"`
	Missing bool   `json:"missing,omitempty"`
	// Generated: the cookie is absent and Envoy generates it (from the client's and its own address,
	// which the model does not know): the hash is unknown offline, and stable once the client sends it.
	Generated bool   `json:"generated,omitempty"`
	Hash      uint64 `json:"hash,omitempty"`
}

// RequestHash computes the hash Envoy's route hash policy gives a request: each present input is hashed
// with xxHash64 (seed 0) and folded in by rotating the previous value left one bit and XOR-ing, a terminal
// input that produced a hash ends the walk. ok is false when no input is present: Envoy then picks at random,
// unless a cookie it generates is among the inputs (see KeyPart.Generated).
func RequestHash(keys []ir.HashKey, r Request) (hash uint64, ok bool, parts []KeyPart) {
	for _, k := range keys {
		var p KeyPart
		var value string
		var present bool
		switch {
		case k.SourceIP:
			p.Source = "source IP"
			value, present = r.ClientIP, r.ClientIP != ""
		case k.Header != "":
			p.Source = "header " + k.Header
			if vs := r.Header(k.Header); len(vs) > 0 {
				// Envoy sorts repeated values so that their order does not matter, then chains them.
				vs = slices.Sorted(slices.Values(vs))
				var h uint64
				for _, v := range vs {
					h = xxhash64Seed(v, h)
				}
				p.Value, p.Hash = strings.Join(vs, ","), h
				parts = append(parts, p)
				hash, ok = fold(hash, ok, h)
				if k.Terminal {
					return hash, ok, parts
				}
				continue
			}
		case k.QueryParameter != "":
			p.Source = "query parameter " + k.QueryParameter
			// Envoy splits the query on & and = without decoding, and takes the first occurrence.
			if _, q, found := strings.Cut(r.Path, "?"); found {
				q, _, _ = strings.Cut(q, "#")
				for _, kv := range strings.Split(q, "&") {
					if n, v, _ := strings.Cut(kv, "="); n == k.QueryParameter {
						value, present = v, true
						break
					}
				}
			}
		case k.Cookie != nil:
			p.Source = "cookie " + k.Cookie.Name
			value, present = r.Cookie(k.Cookie.Name)
			present = present && value != ""
			if !present && k.Cookie.Generate {
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
		if k.Terminal {
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
