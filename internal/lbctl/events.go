package lbctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

func newEvents(g *globals) *cobra.Command {
	var namespace string
	var w watchFlags
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "events [POLICY]",
		Short: "Show endpoint ejections and recoveries, as each Envoy reported them, from the server's history",
		Long: `lbplane keeps the last 1000 health events (and an hour of per-endpoint series, which the dashboard
draws): an endpoint ejected by an Envoy (TYPE Ejected, with the reason: active health check failed,
outlier detection: consecutive 5xx, draining, ...), taking traffic again (Recovered), or, on a backend
with passive checks only, whose ejection lapsed without anything showing it answers (Unknown, until it
serves a request). Each event names the Envoy that reported it: one Envoy's view is its own. lbplane
logs every event too. With POLICY, only that policy's.

--watch prints each new event as it comes (as kubectl get events --watch does), until Ctrl-C or
--watch-timeout. -o json|yaml prints a List (items), -o wide adds the proxy group and the sequence number.`,
		Example: `  lbctl events
  lbctl events demo -o wide
  lbctl events --watch
  lbctl events demo -o json | jq '.items[] | select(.type == "Ejected")'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ns, name := "", ""
			if len(args) == 1 {
				ns, name = g.namespaceFor(cmd, namespace), args[0]
			}
			ctx := cmd.Context()
			var seq uint64
			fetch := func(ctx context.Context) (printable, error) {
				evs, err := c.Events(ctx, seq, ns, name)
				if err != nil {
					return printable{}, err
				}
				if n := len(evs); n > 0 {
					seq = evs[n-1].Seq
				}
				return printable{Object: evs, Names: eventNames(evs), Table: eventTable(evs)}, nil
			}
			p, err := fetch(ctx)
			if err != nil {
				return err
			}
			if !w.on {
				return out.Print(cmd.OutOrStdout(), p)
			}
			if err := out.Print(cmd.OutOrStdout(), p); err != nil {
				return err
			}
			if w.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, w.timeout)
				defer cancel()
			}
			t := time.NewTicker(max(w.interval, 100*time.Millisecond))
			defer t.Stop()
			for printed := 1; w.max == 0 || printed < w.max; {
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
				p, err := fetch(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if len(p.Names) == 0 {
					continue
				}
				if err := out.Print(cmd.OutOrStdout(), p); err != nil {
					return err
				}
				printed++
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of POLICY (Kubernetes mode: the context's, unless given)")
	out = addOutputFlags(cmd, "")
	w.add(cmd)
	return cmd
}

func eventNames(evs []apiwire.HealthEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = "event/" + strings.ToLower(e.Type) + "-" + e.Endpoint + "-" + e.Node
	}
	return out
}

func eventTable(evs []apiwire.HealthEvent) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Time", Type: "string"},
		{Name: "Type", Type: "string"},
		{Name: "Policy", Type: "string", Format: "name"},
		{Name: "Backend", Type: "string"},
		{Name: "Endpoint", Type: "string"},
		{Name: "Envoy", Type: "string"},
		{Name: "Reason", Type: "string"},
		{Name: "Group", Type: "string", Priority: 1},
		{Name: "Seq", Type: "integer", Priority: 1},
	}}
	for _, e := range evs {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{e.Time.Local().Format(time.TimeOnly), e.Type, objkey.Key{Namespace: e.Namespace, Name: e.Policy}.String(),
			e.Backend, e.Endpoint, e.Node, dash(strings.Join(e.Reasons, "; ")), e.Group, e.Seq}})
	}
	return t
}
