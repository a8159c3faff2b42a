package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// slowStartWindow is the window of TestSlowStartPredictionMatchesEnvoy: long enough that a sample of requests
// is a moment of the ramp, short enough for a test.
const slowStartWindow = 20 * time.Second

// TestSlowStartPredictionMatchesEnvoy holds `lbctl whatif --joined ENDPOINT --at AGE` to a real Envoy: a third
// endpoint joins a round-robin backend with slow start (window 20 s, Envoy's defaults otherwise: aggression
// 1, minimum 10 %), once the first two are past their own window (Envoy starts every endpoint of a new
// cluster in slow start too). Its share of 1,000 requests just after it joined, half a window later and a
// window later is within 5 points of what whatif predicts for the age at the middle of each sample: about
// 4.8 %, 20 % and 33.3 %.
func TestSlowStartPredictionMatchesEnvoy(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "ss1", "ss2", "ss3")
	tmpl := oneBackend("HTTP", fmt.Sprintf("{slowStart: {window: %s}}", slowStartWindow), false)
	e := setup(t, true, tmpl, bs[:2]...)
	created := time.Now()
	waitServing(t, e.URL, "ss1", "ss2")
	waitSynced(t, e.L, 1)
	// The first two endpoints ramp from the cluster's creation: wait until they are past the window, so
	// that only the third one is warming. (Time is what is tested here: this waits for the clock, not for
	// a process.)
	time.Sleep(time.Until(created.Add(slowStartWindow + time.Second)))
	e.B = bs
	joined := time.Now()
	push(t, e.L, policy(t, tmpl, e))
	waitSynced(t, e.L, 1)
	third := fmt.Sprintf("endpoint=127.0.0.1:%d", bs[2].Port)
	c := newClient(true)
	for _, at := range []time.Duration{0, slowStartWindow / 2, slowStartWindow + time.Second} {
		time.Sleep(time.Until(joined.Add(at)))
		from := time.Since(joined)
		counts := c.Spread(t, e.URL, 1000, nil)
		mid := (from + time.Since(joined)) / 2
		pv, err := e.L.Client.WhatIf(context.Background(), "default", "p", apiwire.WhatIfRequest{Predict: apiwire.Predict{
			Joined: []string{third}, At: mid.Round(time.Millisecond).String()}})
		if err != nil {
			t.Fatal(err)
		}
		predicted, state := -1.0, ""
		for _, ch := range pv[0].Changes {
			if "endpoint="+ch.Address == third {
				predicted, state = ch.After, ch.State
			}
		}
		measured := float64(counts["ss3"]) / 1000
		t.Logf("%s after the third endpoint joined: it served %.1f %% (%v), whatif --at %s predicted %.1f %% (%s)",
			mid.Round(time.Millisecond), 100*measured, counts, mid.Round(time.Millisecond), 100*predicted, state)
		if predicted < 0 {
			t.Fatalf("whatif has no share for %s: %+v", third, pv[0].Changes)
		}
		if math.Abs(measured-predicted) > 0.05 {
			t.Errorf("at %s: Envoy sent %.1f %% to the third endpoint, whatif predicted %.1f %%", mid, 100*measured, 100*predicted)
		}
		if warming := mid < slowStartWindow; warming != strings.HasPrefix(state, "warming up") {
			t.Errorf("at %s: whatif says %q", mid, state)
		}
	}
}
