package lbctl

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

func newDelete(g *globals) *cobra.Command {
	var namespace string
	var out *outputFlags
	cmd := &cobra.Command{
		Use:               "delete NAME",
		Short:             "Delete a policy; Envoy stops serving it",
		Example:           `  lbctl delete demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if g.kube.enabled() {
				return errors.New("Kubernetes mode: delete the LoadBalancerPolicy with kubectl delete lbp")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), namespace, args[0]); err != nil {
				return err
			}
			res := apiwire.ApplyResult{Policies: []apiwire.AppliedPolicy{{Namespace: namespace, Name: args[0], Outcome: apiwire.Deleted}}}
			return out.Print(cmd.OutOrStdout(), printable{Object: res, Names: []string{policyName(args[0])},
				Text: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "%s/%s deleted\n", namespace, args[0])
					return err
				}})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace")
	out = addOutputFlags(cmd, "")
	return cmd
}
