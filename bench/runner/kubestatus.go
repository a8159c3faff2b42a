package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
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

// settledStatusWrites waits (up to 30 s) until lbplane's status writes have stopped, two readings a second
// apart the same, and returns their count; a status write follows the change that caused it.
func settledStatusWrites(ctx context.Context, cfg *rest.Config) int64 {
	last := int64(-1)
	for range 30 {
		n, err := statusWrites(ctx, cfg)
		if err == nil && n == last {
			return n
		}
		last = n
		select {
		case <-ctx.Done():
			return last
		case <-time.After(time.Second):
		}
	}
	return last
}
