package lbctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// printStatusOf prints p's status and, with perProxy, each Envoy's figures.
func printStatusOf(ctx context.Context, w io.Writer, c *pushclient.Client, p *v1alpha1.LoadBalancerPolicy, perProxy bool) error {
	if err := printPolicyStatus(w, p); err != nil || !perProxy {
		return err
	}
	l, err := c.Live(ctx, p.Namespace, p.Name)
	if err != nil {
		return err
	}
	printPerProxy(w, l)
	return nil
}

// printPerProxy prints each Envoy's own per-endpoint figures.
func printPerProxy(w io.Writer, l *apiwire.LiveResult) {
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.NodeID, b.Name, e.Address, rpsText(e.RequestsPerSecond), e.ActiveRequests,
					e.Requests, percentText(e.ErrorRate), percentText(e.ObservedShare), health)
			}
		}
	}
	tw.Flush()
}
