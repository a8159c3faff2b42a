package lbctl

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

func newRevoke(g *globals) *cobra.Command {
	var req apiwire.RevokeRequest
	var list bool
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "revoke (--node ID | --serial HEX | --group GROUP | --list)",
		Short: "Cut off an Envoy identity at once, until its certificate expires",
		Long: `Revoke a node id (every certificate issued for it so far) or one certificate (by serial number). lbplane
closes the node's xDS connections at once and refuses its reconnects until every certificate the
revocation covers has expired; the revocation survives a restart. A certificate issued for the node after
the revocation is good again, except one issued within five minutes of it (certificates are back-dated by
five minutes for clock skew). --group revokes every certificate of a proxy group issued before it (a lost
group key): Envoy pods that get certificates of their own against their service account token (the chart's
default in Kubernetes) are issued new ones at once and reconnect without a restart. Needs the admin token. In
Kubernetes mode (--kubeconfig, --context) it goes to an lbplane pod through a port-forward, with the chart's
token, as status does; every replica reads the revocation from its ConfigMap.
--list shows the revocations in force.`,
		Example: `  lbctl revoke --node edge-7 --reason "host lost"
  lbctl revoke --serial 5f3a9c0e12
  lbctl revoke --group edge --reason "group key lost"
  lbctl revoke --list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if list {
				if req.NodeID != "" || req.Serial != "" || req.Group != "" {
					return errors.New("--list: not with --node, --serial or --group")
				}
				rs, err := c.Revocations(cmd.Context())
				if err != nil {
					return err
				}
				return out.Print(cmd.OutOrStdout(), printable{Object: rs, Text: func(w io.Writer, _ bool) error {
					if len(rs) == 0 {
						_, err := fmt.Fprintln(w, "No revocations in force.")
						return err
					}
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NODE\tSERIAL\tGROUP\tREVOKED\tUNTIL\tREASON")
					for _, r := range rs {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(r.NodeID), dash(r.Serial), dash(r.Group), r.At.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Reason)
					}
					return tw.Flush()
				}})
			}
			if named := len(slices.DeleteFunc([]string{req.NodeID, req.Serial, req.Group}, func(s string) bool { return s == "" })); named != 1 {
				return errors.New("name exactly one of --node, --serial and --group (or --list)")
			}
			res, err := c.Revoke(cmd.Context(), req)
			if err != nil {
				return err
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: res, Text: func(w io.Writer, _ bool) error {
				what := "node " + res.Revocation.NodeID
				switch {
				case res.Revocation.Serial != "":
					what = "certificate " + res.Revocation.Serial
				case res.Revocation.Group != "":
					what = "proxy group " + res.Revocation.Group
				}
				_, err := fmt.Fprintf(w, "%s revoked until %s; %d connection(s) closed\n", what, res.Revocation.Until.UTC().Format(time.RFC3339), res.Closed)
				return err
			}})
		},
	}
	cmd.Flags().StringVar(&req.NodeID, "node", "", "node id to cut off (every certificate issued for it so far)")
	cmd.Flags().StringVar(&req.Serial, "serial", "", "serial number (hex, colons allowed) of the one certificate to cut off")
	cmd.Flags().StringVar(&req.Group, "group", "", "proxy group whose certificates issued so far are cut off")
	cmd.Flags().StringVar(&req.Reason, "reason", "", "a note kept with the revocation")
	cmd.Flags().BoolVar(&list, "list", false, "list the revocations in force")
	out = addOutputFlags(cmd, "")
	return cmd
}
