package trafficmodel

import (
	"fmt"
	"math"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Ramp is slow start as Envoy runs it: a cluster's slow_start_config.
type Ramp struct {
	Window     time.Duration
	Aggression float64
	// MinFraction is min_weight_percent / 100 (Envoy's default: 10 %).
	MinFraction float64
}

// rampOf reads c as Envoy does; nil without a window.
func rampOf(c *commonv3.SlowStartConfig) *Ramp {
	w := c.GetSlowStartWindow().AsDuration()
	if w <= 0 { // no config (nil) or no window
		return nil
	}
	s := &Ramp{Window: w, Aggression: 1, MinFraction: 0.1}
	if a := c.GetAggression(); a != nil && a.GetDefaultValue() > 0 && !math.IsNaN(a.GetDefaultValue()) {
		s.Aggression = a.GetDefaultValue()
	}
	if p := c.GetMinWeightPercent(); p != nil {
		s.MinFraction = p.GetValue() / 100
	}
	return s
}

// Fraction is the part of its weight Envoy gives an endpoint that became healthy age ago (added, or passed
// its first active health check): weight × max(time_factor^(1/aggression), min_weight_percent), with
// time_factor = max(age, 1 ms) / window, until the window has passed (EdfLoadBalancerBase's
// applySlowStartFactor).
func (s *Ramp) Fraction(age time.Duration) float64 {
	if s == nil || age >= s.Window {
		return 1
	}
	tf := float64(max(age, time.Millisecond)) / float64(s.Window)
	f := tf
	if s.Aggression != 1 {
		f = math.Pow(tf, 1/s.Aggression)
	}
	return max(f, s.MinFraction)
}

// Ages says how long ago endpoints ("address:port") joined their backend, for slow start; an endpoint not
// in it joined long ago.
type Ages map[string]time.Duration

// Joined makes the model's endpoints in ages ramp up as slow start has them: each one's share is by its
// weight times the fraction slow start gives it (Host.Warming). Only round robin and least request ramp
// (Envoy's slow start is theirs); endpoints that joined together ramp together, so that when every
// endpoint of a backend is new the shares are as without slow start.
func (p *Policy) Joined(ages Ages) *Policy {
	for _, c := range p.Clusters {
		c.joined(ages)
	}
	return p
}

func (m *Cluster) joined(ages Ages) {
	if m.slow == nil {
		return
	}
	for i, h := range m.Hosts {
		if age, ok := ages[h.Address]; ok {
			if f := m.slow.Fraction(age); f < 1 {
				m.Hosts[i].Warming = f
			}
		}
	}
}

// effectiveWeight is the weight the load balancer picks host i by: its weight, times its slow-start
// fraction while it warms up.
func (m *Cluster) effectiveWeight(i int) float64 {
	w := float64(m.Hosts[i].Weight)
	if f := m.Hosts[i].Warming; f > 0 {
		w *= f
	}
	return w
}

// slowStartCaveat says what a prediction of a slow-starting cluster leaves out: the ramp, unless the
// prediction was told which endpoints joined when (Policy.Joined), whose shares then follow it (their state
// says "warming up").
func (m *Cluster) slowStartCaveat() string {
	for _, h := range m.Hosts {
		if h.Warming > 0 {
			return ""
		}
	}
	return fmt.Sprintf("slow start (window %s): an endpoint that joined less than the window ago gets less than its share; the shares are those of endpoints that joined longer ago (whatif --joined ENDPOINT --at AGE predicts the ramp)", m.slow.Window)
}

// JoinedAges reads a prediction's joined selectors ("zone=NAME" or "endpoint=ADDRESS[:PORT]": the endpoints
// of the policy namespace/name in cfg that joined) and at (how long ago they joined, a duration; "" is 0s)
// into the ages Policy.Joined takes. Errors name the field, "joined" or "at".
func JoinedAges(cfg *ir.Config, namespace, name string, joined []string, at string) (Ages, error) {
	var age time.Duration
	if at != "" {
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("at: %q: want how long ago the endpoints joined, e.g. 30s", at)
		}
		age = d
	}
	if len(joined) == 0 {
		if at != "" {
			return nil, fmt.Errorf("at: needs joined, the endpoints that joined that long ago (zone=NAME or endpoint=ADDRESS[:PORT])")
		}
		return nil, nil
	}
	sels, err := ParseSelectors(joined)
	if err != nil {
		return nil, fmt.Errorf("joined %w", err)
	}
	ages, err := withJoined(cfg, namespace, name, sels, age)
	if err != nil {
		return nil, fmt.Errorf("joined: %w", err)
	}
	return ages, nil
}

// Ramp is the cluster's slow start as Envoy runs it; nil without one (or for an algorithm Envoy does not
// ramp).
func (m *Cluster) Ramp() *Ramp { return m.slow }
