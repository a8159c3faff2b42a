package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const boundedPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: bounded}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing:
        algorithm: Maglev
        hashKeys: [{header: {name: x-user}}]
{{- if .Factor}}
        hashBalanceFactor: {{.Factor}}
{{- end}}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// inFlightSampler reads every endpoint's requests in flight (rq_active) from Envoy's /clusters until stop,
// and returns, for each sample taken while at least `min` requests were in flight, the busiest endpoint's
// count over the mean, and over the bound a balance factor of `factor` sets.
func inFlightSampler(e *Envoy, cluster string, endpoints, min int, factor float64, stop chan struct{}) func() ([]float64, []float64) {
	var ratios, overBound []float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := adminDo(e, http.MethodGet, "/clusters")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			sum, top := 0, 0
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(l, cluster+"::") || !strings.Contains(l, "::rq_active::") {
					continue
				}
				n, _ := strconv.Atoi(l[strings.LastIndex(l, "::")+2:])
				sum += n
				top = max(top, n)
			}
			if sum >= min {
				ratios = append(ratios, float64(top)/(float64(sum)/float64(endpoints)))
				// Envoy gives each endpoint ceil(factor x (in flight + 1) / endpoints) slots and still picks an
				// endpoint whose slots are all taken, not one already past them: one request over at most.
				overBound = append(overBound, float64(top)/(math.Ceil(factor*float64(sum+1)/float64(endpoints))+1))
			}
		}
	}()
	return func() ([]float64, []float64) { <-done; return ratios, overBound }
}

// settle is how many requests at each end of a stream are not counted.
const settle = 4

// hotKeyRun sends, at once, `hot` streams of requests for one hot user and one stream for each of `others`
// users, each stream `perStream` requests long, and returns the requests per backend and, per other user,
// where its requests went.
func hotKeyRun(t *testing.T, url string, hot, others, perStream int) (map[string]int, []map[string]int) {
	t.Helper()
	c := &Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hot + others}, Timeout: 10 * time.Second}}
	var mu sync.Mutex
	total := map[string]int{}
	perUser := make([]map[string]int, others)
	var wg sync.WaitGroup
	var failed error
	stream := func(user string, record map[string]int) {
		defer wg.Done()
		for k := range perStream {
			b, err := requestVia(c, url, map[string]string{"x-user": user})
			mu.Lock()
			switch {
			case err != nil:
				failed = err
			case k < settle || k >= perStream-settle:
				// While streams start and end fewer requests are in flight, and the bound is lower.
			default:
				total[b]++
				if record != nil {
					record[b]++
				}
			}
			mu.Unlock()
		}
	}
	for range hot {
		wg.Add(1)
		go stream("hot", nil)
	}
	for i := range others {
		perUser[i] = map[string]int{}
		wg.Add(1)
		go stream(fmt.Sprintf("user-%d", i), perUser[i])
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	return total, perUser
}

// TestBoundedLoadHashing: one hot key among many, with requests that take time so that they pile up. Without
// a balance factor the hot key's endpoint takes most of the load; with hashBalanceFactor 150 no endpoint
// carries more than 1.5 times the mean, and the other users' keys stay on their endpoints.
func TestBoundedLoadHashing(t *testing.T) {
	t.Parallel()
	var bs []*Backend
	for i := range 4 {
		bs = append(bs, startBackend(t, fmt.Sprintf("b%d", i+1), 40*time.Millisecond))
	}
	const hot, others, perStream, factor = 48, 24, 24, 150
	maxShare := func(total map[string]int) float64 {
		sum, top := 0, 0
		for _, n := range total {
			sum += n
			top = max(top, n)
		}
		return float64(top) / float64(sum)
	}
	mean := 1.0 / float64(len(bs))
	for _, tc := range []struct {
		name   string
		factor int
	}{{"without", 0}, {"with", factor}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
			e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
			e.E = startEnvoy(t, e.L, "envoy-"+tc.name, true)
			push(t, e.L, policy(t, boundedPolicy, map[string]any{"Port": e.Port, "B": bs, "Factor": tc.factor}))
			waitServing(t, e.URL, "b1", "b2", "b3", "b4")
			// Where each user's key lands when nothing is loaded.
			home := map[string]string{}
			c := newClient(true)
			for _, u := range append([]string{"hot"}, func() (us []string) {
				for i := range others {
					us = append(us, fmt.Sprintf("user-%d", i))
				}
				return
			}()...) {
				b, err := requestVia(c, e.URL, map[string]string{"x-user": u})
				if err != nil {
					t.Fatal(err)
				}
				home[u] = b
			}
			stop := make(chan struct{})
			samples := inFlightSampler(e.E, "default/bounded/app", len(bs), (hot+others)/2, factor/100.0, stop)
			total, perUser := hotKeyRun(t, e.URL, hot, others, perStream)
			close(stop)
			ratios, overBound := samples()
			if len(ratios) < 5 {
				t.Fatalf("only %d samples of the requests in flight with the load fully on", len(ratios))
			}
			slices.Sort(ratios)
			slices.Sort(overBound)
			// The median sample: single samples catch requests between Envoy's pick and the count.
			ratio, over := ratios[len(ratios)/2], overBound[len(overBound)/2]
			share := maxShare(total)
			stayed, all := 0, 0
			// Users who share the hot key's endpoint are moved by design: that endpoint is the one full.
			for i, m := range perUser {
				u := fmt.Sprintf("user-%d", i)
				if home[u] == home["hot"] {
					continue
				}
				for b, n := range m {
					all += n
					if b == home[u] {
						stayed += n
					}
				}
			}
			t.Logf("%s factor: requests in flight on the busiest endpoint %.2f x the mean (median of %d samples, max %.2f; %.2f x the bound of factor 1.5); requests per endpoint %v, busiest %.1f %% (%.2f x the mean); requests of the users not on the hot key's endpoint that stayed on theirs: %.1f %%",
				tc.name, ratio, len(ratios), ratios[len(ratios)-1], over, total, 100*share, share/mean, 100*float64(stayed)/float64(all))
			if tc.factor == 0 {
				// The control: the same load piles up on the hot key's endpoint without a bound.
				if ratio <= float64(factor)/100 {
					t.Errorf("without a factor the busiest endpoint has only %.2f x the mean in flight: the load does not pile up, so the bounded case proves nothing", ratio)
				}
				return
			}
			if over > 1 {
				t.Errorf("busiest endpoint at %.2f x the mean in flight, %.2f x the bound of factor %.2f (Envoy's slots, rounded up, plus the one request it lets over); want at most 1", ratio, over, float64(tc.factor)/100)
			}
			if float64(stayed) < 0.8*float64(all) {
				t.Errorf("only %d of %d requests of users not on the hot key's endpoint stayed on theirs; want at least 80 %%", stayed, all)
			}
		})
	}
}
