package lbctl

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/internal/version"
)

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print lbctl's version",
		Example: `  lbctl version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "lbctl "+version.String())
			return err
		},
	}
}
