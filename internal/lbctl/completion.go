package lbctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
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

// completeModelNames completes the policy names of trace and whatif: from the -f file when one is given (the
// policies they model offline, and its Gateways as gateway/NAME), else as completePolicyNames does.
func completeModelNames(g *globals, file, namespace *string) cobra.CompletionFunc {
	fromServer := completePolicyNames(g, namespace)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if *file == "" {
			return fromServer(cmd, args, toComplete)
		}
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		o, _ := readOfflineObjects(*file, cmd.InOrStdin())
		var names []string
		for _, d := range o.docs {
			ns := d.Policy.Namespace
			if ns == "" {
				ns = v1alpha1.DefaultNamespace
			}
			if ns == *namespace && strings.HasPrefix(d.Policy.Name, toComplete) {
				names = append(names, d.Policy.Name)
			}
		}
		// The files' Gateways, as gateway/NAME.
		for _, k := range o.keys {
			if name := "gateway/" + k.name; k.kind == "Gateway" && k.namespace == *namespace && strings.HasPrefix(name, toComplete) {
				names = append(names, name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
