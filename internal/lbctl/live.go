package lbctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// getLive reads GET /v1/policies/NAMESPACE/NAME/live: each Envoy's own view of the policy's backends.
func getLive(ctx context.Context, c *pushapi.Client, namespace, name string) (*pushapi.LiveResult, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	u := strings.TrimSuffix(c.BaseURL, "/") + "/v1/policies/" + url.PathEscape(namespace) + "/" + url.PathEscape(name) + "/live"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e pushapi.ErrorBody
		if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
			return nil, fmt.Errorf("%s: %s", resp.Status, strings.Join(e.Errors, "; "))
		}
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var l pushapi.LiveResult
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return &l, nil
}

// printStatusOf prints p's status and, with perProxy, each Envoy's figures.
func printStatusOf(ctx context.Context, w io.Writer, c *pushapi.Client, p *v1alpha1.LoadBalancerPolicy, perProxy bool) error {
	if err := printPolicyStatus(w, p); err != nil || !perProxy {
		return err
	}
	l, err := getLive(ctx, c, p.Namespace, p.Name)
	if err != nil {
		return err
	}
	printPerProxy(w, l)
	return nil
}

// printPerProxy prints each Envoy's own per-endpoint figures.
func printPerProxy(w io.Writer, l *pushapi.LiveResult) {
	fmt.Fprintln(w)
	if len(l.Proxies) == 0 {
		fmt.Fprintln(w, "No Envoy has reported on this policy's backends yet.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVOY\tBACKEND\tENDPOINT\tRPS\tACTIVE\tREQUESTS\tERRORS\tOBSERVED\tHEALTH")
	for _, p := range l.Proxies {
		for _, b := range p.Backends {
			for _, e := range b.PerEndpoint {
				health := "healthy"
				if e.EjectedOn > 0 {
					health = "ejected: " + strings.Join(e.Reasons, "; ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.NodeID, b.Name, e.Address, dash(e.RequestsPerSecond), e.ActiveRequests,
					e.Requests, dash(e.ErrorRate), dash(e.ObservedShare), health)
			}
		}
	}
	tw.Flush()
}
