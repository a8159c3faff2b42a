package lbctl

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func newDelete(g *globals) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a policy; Envoy stops serving it",
		Example: `  lbctl delete demo`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), namespace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted\n", namespace, args[0])
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace")
	return cmd
}
