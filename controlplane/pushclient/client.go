// Package pushclient calls lbplane's push API (controlplane/pushapi): push, list, get, delete, explain, diff,
// predictions (trace, what-if, traffic previews), proxies, certificates and version. It links none of the
// server: answers decode into apiwire's types.
package pushclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// Client calls the API.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
	// NoRetry makes a call refused with 429 fail at once instead of waiting for Retry-After.
	NoRetry bool
}

// APIError is a refused call, with every error the server gave.
type APIError struct {
	Status int
	Errors []string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s", http.StatusText(e.Status), strings.Join(e.Errors, "; "))
}

// Retries of a call refused with 429: the server's rate limit is per address, and a script that pushes in a
// loop should slow down to it, not fail. Bounded in count and in each wait, so a misbehaving server cannot
// hold the client for long.
const (
	maxRetries    = 4
	maxRetryAfter = 5 * time.Second
)

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded to (0, maxRetryAfter].
func retryAfter(h string, now time.Time) time.Duration {
	d := time.Second
	if secs, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 100*time.Millisecond), maxRetryAfter)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	for attempt := 0; ; attempt++ {
		wait, err := c.once(ctx, method, path, body, out)
		if wait == 0 || attempt == maxRetries || c.NoRetry {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// once makes one call; a positive wait means it was rate-limited and may be retried after that long.
func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) (time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach lbplane at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, err
	}
	var wait time.Duration
	if resp.StatusCode == http.StatusTooManyRequests {
		wait = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	if resp.StatusCode != http.StatusOK {
		e := &APIError{Status: resp.StatusCode}
		var eb apiwire.ErrorBody
		if json.Unmarshal(data, &eb) == nil && len(eb.Errors) > 0 {
			e.Errors = eb.Errors
		} else {
			e.Errors = []string{c.notTheAPI(ctx, hc, method, path, resp, data)}
		}
		return wait, e
	}
	if out != nil {
		return 0, json.Unmarshal(data, out)
	}
	return 0, nil
}

// Apply pushes YAML or JSON documents, all or nothing.
func (c *Client) Apply(ctx context.Context, docs []byte, dryRun bool) (*apiwire.ApplyResult, error) {
	path := "/v1/policies"
	if dryRun {
		path += "?dryRun=true"
	}
	res := &apiwire.ApplyResult{}
	return res, c.do(ctx, http.MethodPost, path, docs, res)
}

// List returns every policy with its status.
func (c *Client) List(ctx context.Context) ([]*v1alpha1.LoadBalancerPolicy, error) {
	var l struct {
		Items []*v1alpha1.LoadBalancerPolicy `json:"items"`
	}
	return l.Items, c.do(ctx, http.MethodGet, "/v1/policies", nil, &l)
}

// GatewayPolicies returns, with their status, the policies the Gateway namespace/name became (GET
// /v1/policies?gateway=NAMESPACE/NAME): one per listener port and host name served there, each annotated
// with what it serves (gatewayapi.ServedBy). A server that does not filter answers every policy; they are
// filtered here too.
func (c *Client) GatewayPolicies(ctx context.Context, namespace, name string) ([]*v1alpha1.LoadBalancerPolicy, error) {
	var l struct {
		Items []*v1alpha1.LoadBalancerPolicy `json:"items"`
	}
	gw := objkey.Key{Namespace: namespace, Name: name}.String()
	if err := c.do(ctx, http.MethodGet, "/v1/policies?gateway="+url.QueryEscape(gw), nil, &l); err != nil {
		return nil, err
	}
	var out []*v1alpha1.LoadBalancerPolicy
	for _, p := range l.Items {
		if p.Annotations[gatewayapi.AnnotationGateway] == gw {
			out = append(out, p)
		}
	}
	return out, nil
}

// Get returns one policy with its status.
func (c *Client) Get(ctx context.Context, namespace, name string) (*v1alpha1.LoadBalancerPolicy, error) {
	p := &v1alpha1.LoadBalancerPolicy{}
	return p, c.do(ctx, http.MethodGet, policyPath(namespace, name), nil, p)
}

// Delete removes one policy.
func (c *Client) Delete(ctx context.Context, namespace, name string) error {
	return c.do(ctx, http.MethodDelete, policyPath(namespace, name), nil, nil)
}

// Live returns each Envoy's own view of one policy's backends, and their sum.
func (c *Client) Live(ctx context.Context, namespace, name string) (*apiwire.LiveResult, error) {
	var out apiwire.LiveResult
	if err := c.do(ctx, http.MethodGet, policyPath(namespace, name, "live"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Explain asks how one policy became Envoy config.
func (c *Client) Explain(ctx context.Context, namespace, name string) (*explain.Explanation, error) {
	var out explain.Explanation
	if err := c.do(ctx, http.MethodGet, policyPath(namespace, name, "explain"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Diff asks what pushing docs would change in Envoy's resources.
func (c *Client) Diff(ctx context.Context, docs []byte) (*apiwire.DiffResult, error) {
	var out apiwire.DiffResult
	if err := c.do(ctx, http.MethodPost, "/v1/diff", docs, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TraceAnswer answers a trace: where the request goes, and where it enters Envoy.
type TraceAnswer struct {
	Trace  *trafficmodel.Trace `json:"trace"`
	Target apiwire.TraceTarget `json:"target"`
}

// Trace asks where one request to a policy goes, on what the server serves.
func (c *Client) Trace(ctx context.Context, namespace, name string, req apiwire.TraceRequest) (*TraceAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out TraceAnswer
	if err := c.do(ctx, http.MethodPost, policyPath(namespace, name, "trace"), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WhatIf asks where a policy's traffic goes with more endpoints down, on what the server serves.
func (c *Client) WhatIf(ctx context.Context, namespace, name string, req apiwire.WhatIfRequest) ([]*trafficmodel.Preview, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out []*trafficmodel.Preview
	return out, c.do(ctx, http.MethodPost, policyPath(namespace, name, "whatif"), body, &out)
}

// Traffic asks what pushing docs would do to each of their policies' traffic; zone, when set, predicts for
// an Envoy in that zone instead of the proxy group's connected Envoys.
func (c *Client) Traffic(ctx context.Context, docs []byte, zone *string) ([]*trafficmodel.Preview, error) {
	path := "/v1/traffic"
	if zone != nil {
		path += "?zone=" + url.QueryEscape(*zone)
	}
	var out []*trafficmodel.Preview
	return out, c.do(ctx, http.MethodPost, path, docs, &out)
}

// policyPath is the push API's path of a policy, and of what is under it (more), each segment escaped.
func policyPath(namespace, name string, more ...string) string {
	segs := []string{"", "v1", "policies", url.PathEscape(namespace), url.PathEscape(name)}
	for _, m := range more {
		segs = append(segs, url.PathEscape(m))
	}
	return strings.Join(segs, "/")
}

// Proxies returns every connected Envoy.
func (c *Client) Proxies(ctx context.Context) ([]apiwire.ProxyStatus, error) {
	var out []apiwire.ProxyStatus
	return out, c.do(ctx, http.MethodGet, "/v1/proxies", nil, &out)
}

// IssueCertificate asks lbplane for an Envoy client certificate for nodeID in group.
func (c *Client) IssueCertificate(ctx context.Context, nodeID, group string) (*apiwire.CertResponse, error) {
	body, err := json.Marshal(apiwire.CertRequest{NodeID: nodeID, ProxyGroup: group})
	if err != nil {
		return nil, err
	}
	var out apiwire.CertResponse
	if err := c.do(ctx, http.MethodPost, "/v1/certificates", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Revoke cuts off a node (nodeID) or one certificate (serial) at once, until its certificates expire.
func (c *Client) Revoke(ctx context.Context, req apiwire.RevokeRequest) (*apiwire.RevokeResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out apiwire.RevokeResult
	if err := c.do(ctx, http.MethodPost, "/v1/revocations", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Revocations lists the revocations in force.
func (c *Client) Revocations(ctx context.Context) ([]apiwire.Revocation, error) {
	var out []apiwire.Revocation
	return out, c.do(ctx, http.MethodGet, "/v1/revocations", nil, &out)
}

// Version returns the version of the lbplane serving the API.
func (c *Client) Version(ctx context.Context) (*apiwire.Version, error) {
	var out apiwire.Version
	if err := c.do(ctx, http.MethodGet, "/v1/version", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// notTheAPI explains an answer that is not the push API's (lbplane's API answers every error with a JSON
// body): what answered at BaseURL instead, as far as one more request tells it (lbplane's metrics port, an
// Envoy, an HTTPS server asked in plain HTTP), beside what it said.
func (c *Client) notTheAPI(ctx context.Context, hc *http.Client, method, path string, resp *http.Response, body []byte) string {
	said := strings.TrimSpace(string(body))
	if len(said) > 200 {
		said = said[:200] + "..."
	}
	answer := fmt.Sprintf("%s %s answered %q (%s)", method, path, said, resp.Status)
	what := "no lbplane push API is there (is --server the push API's address, port 18001 by default?)"
	switch {
	case strings.EqualFold(resp.Header.Get("Server"), "envoy"):
		what = "that is an Envoy (a listener or its stats port), not lbplane's push API (port 18001 by default)"
	case strings.Contains(said, "HTTP request to an HTTPS server"):
		what = "that server speaks HTTPS: use an https:// --server"
	case resp.StatusCode == http.StatusNotFound:
		// lbplane's metrics port answers 404 to the API's paths, and serves /metrics.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/metrics", nil)
		if err != nil {
			break
		}
		r, err := hc.Do(req)
		if err != nil {
			break
		}
		m, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body.Close()
		if r.StatusCode == http.StatusOK && bytes.Contains(m, []byte("lbplane_build_info")) {
			what = "that is lbplane's metrics port (18002 by default), not its push API (18001 by default)"
		} else if r.StatusCode == http.StatusOK && bytes.Contains(m, []byte("# TYPE ")) {
			what = "that serves Prometheus metrics, not lbplane's push API (port 18001 by default)"
		}
	}
	return fmt.Sprintf("%s: %s; %s", c.BaseURL, what, answer)
}
