package lbctl

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// endpointStates are lbctl endpoint's subcommands and the state each sets.
var endpointStates = []struct{ use, state, short string }{
	{"drain", string(v1alpha1.OverrideDraining), "Drain an endpoint: no new requests, those under way and open connections carry on"},
	{"maintenance", string(v1alpha1.OverrideMaintenance), "Take an endpoint out of rotation: no traffic at all and no health checks, until ready"},
	{"ready", apiwire.StateReady, "Undo drain or maintenance: the endpoint is as the policy's spec says again"},
}

func newEndpoint(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "endpoint drain|maintenance|ready POLICY ADDRESS[:PORT] | endpoint list",
		Short: "Drain an endpoint, put it under maintenance, or make it ready again (admin token)",
		Long: `Set an endpoint's state from outside the policy, as HAProxy's runtime API does with "set server state
drain|maint|ready":

  drain        Envoy's DRAINING health status: no new requests go to the endpoint; requests under way
               and open connections (a TCP proxy's, an HTTP keep-alive's requests in flight) carry on.
  maintenance  left out of Envoy's load assignment: no traffic at all, not even when the backend is in
               panic, and no health checks; requests under way finish.
  ready        removes the override: the endpoint is as the spec says again (an endpoint the spec itself
               drains with state: Draining stays draining, and lbctl says so).

lbplane writes the override to its store before serving it: it survives a restart, a push of the policy
leaves it in force, and with --store etcd every replica serves it. It shows in lbctl status POLICY, in the
policy's status (status.endpointOverrides), on the dashboard, and in lbctl endpoint list. The stronger of
the spec's state and the override applies (Active, then Draining, then Maintenance). ADDRESS alone covers
every port of it; an address is an IP address or a host name the policy's endpoints name; --backend limits
the change to one backend. The answer waits for the policy's Envoys to take the change, as a push does.
Needs the admin token; in Kubernetes mode drain with the spec's state: Draining, or the Pod's readiness.`,
		Example: `  lbctl endpoint drain demo 127.0.0.1:18081
  lbctl endpoint maintenance demo 10.0.0.7 --backend api -n shop
  lbctl endpoint ready demo 127.0.0.1:18081
  lbctl endpoint list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	for _, s := range endpointStates {
		cmd.AddCommand(newEndpointState(g, s.use, s.state, s.short))
	}
	cmd.AddCommand(newEndpointList(g))
	return cmd
}

func newEndpointState(g *globals, use, state, short string) *cobra.Command {
	var namespace, backend string
	var out *outputFlags
	cmd := &cobra.Command{
		Use:               use + " POLICY ADDRESS[:PORT]",
		Short:             short,
		Example:           "  lbctl endpoint " + use + " demo 127.0.0.1:18081",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if g.kube.enabled() {
				return errors.New("in Kubernetes mode, drain an endpoint with its spec's state: Draining (kubectl edit), or through its Pod's readiness; lbctl endpoint needs lbplane serve's push API")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ns := g.namespaceFor(cmd, namespace)
			res, err := c.SetEndpointState(cmd.Context(), ns, args[0], apiwire.EndpointStateRequest{Endpoint: args[1], Backend: backend, State: state})
			if err != nil {
				return err
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: res, Names: []string{policyName(args[0])}, Text: func(w io.Writer, _ bool) error {
				what := fmt.Sprintf("endpoint %s of %s", args[1], res.Policy)
				if backend != "" {
					what += " (backend " + backend + ")"
				}
				switch {
				case state == apiwire.StateReady && !res.Changed:
					fmt.Fprintf(w, "%s: no drain or maintenance to undo\n", what)
				case state == apiwire.StateReady:
					fmt.Fprintf(w, "%s: ready (as the spec says)\n", what)
				case !res.Changed:
					fmt.Fprintf(w, "%s: %s already (%d endpoint(s))\n", what, state, res.Endpoints)
				default:
					fmt.Fprintf(w, "%s: %s (%d endpoint(s))\n", what, state, res.Endpoints)
				}
				if len(res.SpecDraining) > 0 {
					fmt.Fprintf(w, "still draining, as the spec (state: Draining) or Kubernetes says: %s\n", strings.Join(res.SpecDraining, ", "))
				}
				if res.LaggingTotal > 0 {
					fmt.Fprintf(w, "not yet acknowledged by %d Envoy(s): %s\n", res.LaggingTotal, strings.Join(res.Lagging, ", "))
				}
				printOverrides(w, res.Overrides)
				return nil
			}})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of POLICY")
	cmd.Flags().StringVar(&backend, "backend", "", "only in this backend of the policy (default: every backend that has the endpoint)")
	out = addOutputFlags(cmd, "")
	return cmd
}

func newEndpointList(g *globals) *cobra.Command {
	var out *outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List every policy's endpoint overrides in force",
		Example: "  lbctl endpoint list\n  lbctl endpoint list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			all, err := c.EndpointOverrides(cmd.Context())
			if err != nil {
				return err
			}
			if all == nil {
				all = []apiwire.PolicyOverrides{}
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: all, Text: func(w io.Writer, _ bool) error {
				if len(all) == 0 {
					_, err := fmt.Fprintln(w, "No endpoint is drained or under maintenance by an override.")
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "POLICY\tBACKEND\tENDPOINT\tSTATE\tENDPOINTS\tSINCE")
				for _, p := range all {
					for _, o := range p.Overrides {
						fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%s\n", p.Namespace, p.Name, dashAll(o.Backend), o.Endpoint, o.State, o.Endpoints, o.Since.UTC().Format(time.RFC3339))
					}
				}
				return tw.Flush()
			}})
		},
	}
	out = addOutputFlags(cmd, "")
	return cmd
}

// dashAll prints an override's backend, "*" when it names none (every backend).
func dashAll(backend string) string {
	if backend == "" {
		return "*"
	}
	return backend
}

// printOverrides prints a policy's endpoint overrides in force (lbctl status POLICY, lbctl endpoint).
func printOverrides(w io.Writer, ovs []v1alpha1.EndpointOverrideStatus) {
	if len(ovs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OVERRIDE\tBACKEND\tSTATE\tENDPOINTS\tSINCE")
	for _, o := range ovs {
		n := fmt.Sprint(o.Endpoints)
		if o.Endpoints == 0 {
			n = "0 (no such endpoint now)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Endpoint, dashAll(o.Backend), o.State, n, o.Since.Local().Format(time.DateTime))
	}
	tw.Flush()
}
