package trafficmodel

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Selector names endpoints of a prediction (taken down, or joined): "zone=NAME" or "endpoint=ADDRESS[:PORT]".
type Selector struct {
	Zone     string
	Endpoint string
}

// ParseSelector reads "zone=a" or "endpoint=10.0.0.3:8080" (an endpoint without a port selects every port
// of that address).
func ParseSelector(s string) (Selector, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || v == "" {
		return Selector{}, fmt.Errorf("%q: want zone=NAME or endpoint=ADDRESS[:PORT]", s)
	}
	switch k {
	case "zone":
		return Selector{Zone: v}, nil
	case "endpoint":
		return Selector{Endpoint: v}, nil
	}
	return Selector{}, fmt.Errorf("%q: want zone=NAME or endpoint=ADDRESS[:PORT]", s)
}

// ParseSelectors reads each of ss as ParseSelector does; the error is the first one's.
func ParseSelectors(ss []string) ([]Selector, error) {
	out := make([]Selector, 0, len(ss))
	for _, s := range ss {
		sel, err := ParseSelector(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

// WithDown returns down plus every endpoint of the policy's backends that a selector names; a selector
// that names nothing is an error, so that a typo does not pass for "no change".
func WithDown(cfg *ir.Config, namespace, name string, down Down, sels []Selector) (Down, error) {
	out := maps.Clone(down)
	if out == nil {
		out = Down{}
	}
	err := selected(cfg, namespace, name, sels, func(addr string, s Selector) {
		if s.Zone != "" {
			out[addr] = "what-if: zone " + s.Zone + " down"
		} else {
			out[addr] = "what-if: endpoint down"
		}
	})
	return out, err
}

// withJoined returns the ages (Policy.Joined) of every endpoint of the policy's backends that a selector
// names: each joined at ago. A selector that names nothing is an error.
func withJoined(cfg *ir.Config, namespace, name string, sels []Selector, at time.Duration) (Ages, error) {
	out := Ages{}
	err := selected(cfg, namespace, name, sels, func(addr string, _ Selector) { out[addr] = at })
	return out, err
}

// selected calls found with each endpoint ("address:port") of the policy's clusters in cfg that a selector
// names, and fails on the first selector that names none.
func selected(cfg *ir.Config, namespace, name string, sels []Selector, found func(addr string, s Selector)) error {
	for _, s := range sels {
		hit := false
		for _, g := range cfg.Groups {
			for _, c := range g.Clusters {
				if _, used := g.ClusterSource(c, namespace, name); !used {
					continue
				}
				for _, e := range c.Endpoints {
					addr := HostKey(e.Address, e.Port)
					if (s.Zone != "" && e.Zone == s.Zone) || (s.Endpoint != "" && (s.Endpoint == addr || s.Endpoint == e.Address)) {
						found(addr, s)
						hit = true
					}
				}
			}
		}
		if !hit {
			what := "zone " + s.Zone
			if s.Endpoint != "" {
				what = "endpoint " + s.Endpoint
			}
			return fmt.Errorf("%s: no endpoint of %s/%s is in it", what, namespace, name)
		}
	}
	return nil
}
