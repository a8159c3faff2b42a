package lbctl

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newStatus(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every connected Envoy: the config version it runs and whether it is in sync",
		Long: `Show every connected Envoy (one line per xDS stream).

STATE is SYNCED when the Envoy acknowledged everything it was sent and was sent the current config,
STALE while it has not acknowledged the current config yet, and NACKED when it rejected the last
response of some type (MESSAGE says why; it keeps running its previous config).`,
		Example: `  lbctl status
  lbctl status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			proxies, err := c.Proxies(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				b, _ := json.MarshalIndent(proxies, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			case "", "table":
			default:
				return fmt.Errorf("--output: unsupported value %q; supported: table, json", output)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NODE\tGROUP\tAPI\tSTATE\tVERSION\tCURRENT\tCONNECTED\tMESSAGE")
			for _, p := range proxies {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.NodeID, p.Group, p.API, p.State, dash(p.Version), p.Current,
					time.Since(p.ConnectedAt).Truncate(time.Second), p.Message)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "table (default) or json")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
