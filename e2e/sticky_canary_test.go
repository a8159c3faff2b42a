package e2e

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStickyCanaryKeepsItsClientShare: a canary at weight 20 beside the stable version at 80, with sessions
// across both (sessionPersistence.acrossBackends), while clients arrive and leave. The time is compressed
// to steps: one client arrives per step, each stays for a random time (exponential, a mean of 4,000 steps),
// and at each step one client still there sends another request with its cookie. Over 8,000 arrivals (a
// population of about 3,500 at the end, the canary's share counted every 1,000 steps from step 4,000) the
// canary holds 20 % ± 2 points of the clients present, and no request of any client reaches another version
// than its first did: the drift to 100 % that Flagger #1532 and ingress-nginx #3717 report does not happen.
func TestStickyCanaryKeepsItsClientShare(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "stable-a", "stable-b", "canary-a", "canary-b")
	e := setupWith(t, versionSwitchPolicy, map[string]any{"B": bs, "V1": "80", "V2": "20"}, bs...)
	waitServing(t, e.URL, "stable-a", "stable-b", "canary-a", "canary-b")
	waitSynced(t, e.L, 1)
	isCanary := func(b string) bool { return strings.HasPrefix(b, "canary-") }

	const (
		arrivals = 8000
		lifetime = 4000.0
		from     = 4000
		every    = 1000
	)
	seed := uint64(20261129)
	r := rand.New(rand.NewPCG(seed, seed))
	type client struct {
		c       *Client
		first   string
		leaveAt int
	}
	var present []*client
	switched, shares := 0, []float64{}
	for step := range arrivals {
		c := &client{c: jarClient(), leaveAt: step + int(math.Ceil(r.ExpFloat64()*lifetime))}
		b, err := requestVia(c.c, e.URL, nil)
		if err != nil {
			t.Fatalf("step %d: a new client: %v", step, err)
		}
		c.first = b
		present = append(present, c)
		// Those whose time is up leave.
		kept := present[:0]
		for _, p := range present {
			if p.leaveAt > step {
				kept = append(kept, p)
			}
		}
		present = kept
		// One client still there comes back.
		back := present[r.IntN(len(present))]
		b, err = requestVia(back.c, e.URL, nil)
		if err != nil {
			t.Fatalf("step %d: a returning client: %v", step, err)
		}
		if isCanary(b) != isCanary(back.first) {
			switched++
			if switched <= 5 {
				t.Errorf("step %d: a client that started on %s was sent to %s", step, back.first, b)
			}
		}
		if step >= from && (step-from)%every == 0 || step == arrivals-1 {
			n := 0
			for _, p := range present {
				if isCanary(p.first) {
					n++
				}
			}
			shares = append(shares, float64(n)/float64(len(present)))
			t.Logf("step %d: %d clients present, %.1f %% on the canary", step, len(present), 100*shares[len(shares)-1])
		}
	}
	if switched > 0 {
		t.Errorf("%d of %d returning requests reached the other version", switched, arrivals)
	}
	mean := 0.0
	for _, s := range shares {
		mean += s / float64(len(shares))
	}
	if math.Abs(mean-0.20) > 0.02 {
		t.Errorf("the canary held %.1f %% of the clients present (mean of %v), want 20 %% ± 2 points", 100*mean, fmtShares(shares))
	}
}

func fmtShares(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.1f%%", 100*x))
	}
	return strings.Join(out, " ")
}
