package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The runner's Kubernetes client logs nothing (controller-runtime warns with a stack trace otherwise).
func init() { ctrllog.SetLogger(logr.Discard()) }

// statusWrites counts the writes of LoadBalancerPolicy status the API server has served since it started,
// from its own apiserver_request_total (every verb on the status subresource): what lbplane wrote, counted
// where it lands, with nothing in lbplane to trust.
func statusWrites(ctx context.Context, cfg *rest.Config) (int64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("kube-apiserver /metrics: %s", resp.Status)
	}
	var n int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="loadbalancerpolicies"`) ||
			!strings.Contains(l, `subresource="status"`) || strings.Contains(l, `verb="GET"`) || strings.Contains(l, `verb="LIST"`) || strings.Contains(l, `verb="WATCH"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("kube-apiserver /metrics: %q: %w", l, err)
		}
		n += int64(v)
	}
	return n, sc.Err()
}

// settledStatusWrites waits until lbplane's status writes have stopped and returns their count: at least
// atLeast writes served (the first statuses of the policies just created: one each), then the count the
// same for settleReadings readings a second apart. Bounded by settleLimit, generous for 10,000 policies'
// first statuses on a loaded machine; at the limit it says so and returns the count as it is. A status
// write follows the change that caused it.
func settledStatusWrites(ctx context.Context, cfg *rest.Config, atLeast int64) int64 {
	start := time.Now()
	last, same := int64(-1), 0
	for time.Since(start) < settleLimit {
		n, err := statusWrites(ctx, cfg)
		switch {
		case err != nil:
			same = 0
		case n == last && n >= atLeast:
			if same++; same >= settleReadings {
				if d := time.Since(start); d > 10*time.Second {
					fmt.Fprintf(os.Stderr, "status writes settled at %d after %s\n", n, d.Round(time.Second))
				}
				return n
			}
		default:
			last, same = n, 0
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(time.Second):
		}
	}
	fmt.Fprintf(os.Stderr, "status writes still moving after %s (%d, expected at least %d): counting from here\n", settleLimit, last, atLeast)
	return last
}

const (
	settleReadings = 5
	settleLimit    = 5 * time.Minute
)
