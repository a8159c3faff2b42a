package lbctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completePolicyNames completes a policy name argument with the names the server (or, in Kubernetes mode,
// the cluster) has in the command's namespace. A shell waits for it, so it gives up after a few seconds
// and then offers nothing rather than an error.
func completePolicyNames(g *globals, namespace *string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		src, err := g.policies()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		parent := cmd.Context()
		if parent == nil {
			parent = context.Background()
		}
		ctx, cancel := context.WithTimeout(parent, 5*time.Second)
		defer cancel()
		items, err := src.List(ctx, g.namespaceFor(cmd, *namespace))
		if err != nil {
			cobra.CompErrorln("listing policies: " + err.Error())
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, p := range items {
			if strings.HasPrefix(p.Name, toComplete) {
				names = append(names, p.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
