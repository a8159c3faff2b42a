package lbctl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

func newWhatIf(g *globals) *cobra.Command {
	var namespace, file string
	var out *outputFlags
	var downs []string
	cmd := &cobra.Command{
		Use:   "whatif NAME --down zone=NAME|endpoint=ADDRESS[:PORT]...",
		Short: "Predict where a policy's traffic goes if endpoints or a zone go down",
		Long: `Take endpoints down in the traffic model and show each endpoint's predicted share before and
after, the hash keys and sessions that move, and the zones traffic fails over to, with Envoy's
priority and panic rules (see lbctl trace). Nothing is changed.

"Before" is the current health from the policy's status (what lbplane last read from the Envoys'
/clusters); with -f the policy comes from files and every endpoint starts healthy.`,
		Example: `  lbctl whatif shop --down zone=zone-a
  lbctl whatif shop --down endpoint=10.0.0.3:8080 --down endpoint=10.0.0.4
  lbctl whatif shop -f shop.yaml --down zone=zone-a -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeModelNames(g, &file, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if len(downs) == 0 {
				return fmt.Errorf("--down: name at least one zone=NAME or endpoint=ADDRESS[:PORT]")
			}
			res, _, down, err := modelSource{file, namespace, args[0]}.load(cmd, g)
			if err != nil {
				return err
			}
			before, err := trafficmodel.ForPolicy(res.IR, namespace, args[0], down)
			if err != nil {
				return err
			}
			more, err := addDowns(res, namespace, args[0], down, downs)
			if err != nil {
				return err
			}
			after, err := trafficmodel.ForPolicy(res.IR, namespace, args[0], more)
			if err != nil {
				return err
			}
			pv := []*trafficmodel.Preview{trafficmodel.Compare(before, after)}
			return out.Print(cmd.OutOrStdout(), printable{Object: pv, Names: []string{policyName(args[0])},
				Text: func(w io.Writer, _ bool) error { printPreviews(w, pv); return nil }})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME")
	f.StringVarP(&file, "filename", "f", "", "model these files offline instead of the server's policies")
	f.StringArrayVar(&downs, "down", nil, "zone=NAME or endpoint=ADDRESS[:PORT] to take down (repeatable)")
	out = addOutputFlags(cmd, "")
	return cmd
}
