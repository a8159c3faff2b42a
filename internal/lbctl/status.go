package lbctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

func newStatus(g *globals) *cobra.Command {
	var output, namespace string
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show the connected Envoys, or one policy's backends: endpoint health and the last minute's load",
		Long: `Without NAME: every connected Envoy (one line per xDS stream). STATE is SYNCED when the Envoy
acknowledged everything it was sent and was sent the current config, STALE while it has not acknowledged
the current config yet, and NACKED when it rejected the last response of some type (MESSAGE says why; it
keeps running its previous config).

With NAME: the policy's conditions and, per backend, what its Envoys report: endpoints total, healthy
and ejected, the ejected ones with the reason (active health check failed, outlier detection:
consecutive 5xx, success rate, draining, ...), and requests, errors (5xx and connection failures) and
p99 latency over the last minute, summed over the Envoys. Envoys report through their stats port
(lbctl bootstrap --stats-port, on by default); lbplane reads it every --proxy-stats-interval.`,
		Example: `  lbctl status
  lbctl status demo
  lbctl status demo -n shop -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			switch output {
			case "", "table", "json":
			default:
				return fmt.Errorf("--output: unsupported value %q; supported: table, json", output)
			}
			w := cmd.OutOrStdout()
			if len(args) == 1 {
				p, err := c.Get(cmd.Context(), namespace, args[0])
				if err != nil {
					return err
				}
				if output == "json" {
					return printJSON(w, p.Status)
				}
				return printPolicyStatus(w, p)
			}
			proxies, err := c.Proxies(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(w, proxies)
			}
			return printProxies(w, proxies)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "table (default) or json")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME")
	return cmd
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func printProxies(w io.Writer, proxies []apiwire.ProxyStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGROUP\tAPI\tSTATE\tVERSION\tCURRENT\tCONNECTED\tMESSAGE")
	for _, p := range proxies {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.NodeID, p.Group, p.API, p.State, dash(p.Version), p.Current,
			time.Since(p.ConnectedAt).Truncate(time.Second), p.Message)
	}
	return tw.Flush()
}

func printPolicyStatus(w io.Writer, p *v1alpha1.LoadBalancerPolicy) error {
	st := p.Status
	fmt.Fprintf(w, "Policy %s/%s (generation %d)\n", p.Namespace, p.Name, p.Generation)
	for _, t := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionResolvedRefs, v1alpha1.ConditionProgrammed} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			fmt.Fprintf(w, "  %-13s %-5s %s: %s\n", t, c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintf(w, "  Proxies       %d connected, %d synced\n", st.Proxies.Connected, st.Proxies.Synced)
	fmt.Fprintln(w)
	if len(st.Backends) == 0 {
		fmt.Fprintln(w, "No backend health reported yet: no Envoy of the group has a stats port (lbctl bootstrap --stats-port), or it was not read yet.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "BACKEND\tPROXIES\tENDPOINTS\tHEALTHY\tEJECTED\tREQUESTS\tERRORS\tP99\tWINDOW")
		for _, b := range st.Backends {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", b.Name, b.Proxies, b.Endpoints.Total, b.Endpoints.Healthy,
				b.Endpoints.Ejected, b.Requests, b.Errors, dash(b.LatencyP99), time.Duration(b.WindowSeconds)*time.Second)
		}
		tw.Flush()
		var rows []string
		for _, b := range st.Backends {
			for _, e := range b.Ejected {
				rows = append(rows, fmt.Sprintf("%s\t%s\t%d of %d\t%s", b.Name, e.Address, e.Proxies, b.Proxies, strings.Join(e.Reasons, "; ")))
			}
		}
		if len(rows) > 0 {
			fmt.Fprintln(w)
			tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "BACKEND\tEJECTED ENDPOINT\tON PROXIES\tREASON")
			for _, r := range rows {
				fmt.Fprintln(tw, r)
			}
			tw.Flush()
		}
	}
	if len(st.Warnings) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Warnings (lbctl lint explains each):")
		for _, x := range st.Warnings {
			fmt.Fprintln(w, "  "+x)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
