package lbctl

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func newGet(g *globals) *cobra.Command {
	var namespace, output string
	var all bool
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List policies, or show one, with their status",
		Example: `  lbctl get
  lbctl get demo -o yaml
  lbctl get -A -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var items []*v1alpha1.LoadBalancerPolicy
			if len(args) == 1 {
				p, err := c.Get(cmd.Context(), namespace, args[0])
				if err != nil {
					return err
				}
				items = []*v1alpha1.LoadBalancerPolicy{p}
			} else {
				list, err := c.List(cmd.Context())
				if err != nil {
					return err
				}
				for _, p := range list {
					if all || p.Namespace == namespace {
						items = append(items, p)
					}
				}
			}
			return printPolicies(cmd.OutOrStdout(), items, output, len(args) == 1, all)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "table (default), yaml or json")
	return cmd
}

func printPolicies(w io.Writer, items []*v1alpha1.LoadBalancerPolicy, output string, single, all bool) error {
	var v any = items
	if single && len(items) == 1 {
		v = items[0]
	} else if output != "" {
		v = map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "LoadBalancerPolicyList", "items": items}
	}
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "", "table":
	default:
		return fmt.Errorf("--output: unsupported value %q; supported: table, yaml, json", output)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	header := "NAME\tPROTOCOL\tPORT\tALGORITHM\tACCEPTED\tPROGRAMMED\tENDPOINTS\tAGE"
	if all {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for _, p := range items {
		algo := ""
		if len(p.Spec.Backends) > 0 {
			algo = string(p.Spec.Backends[0].LoadBalancing.Algorithm)
			if algo == "" {
				algo = string(v1alpha1.AlgorithmRoundRobin)
			}
		}
		row := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s", p.Name, p.Spec.Listener.Protocol, p.Spec.Listener.Port, algo,
			condition(p, v1alpha1.ConditionAccepted), condition(p, v1alpha1.ConditionProgrammed), p.Status.Endpoints.Total, age(p.CreationTimestamp))
		if all {
			row = p.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func condition(p *v1alpha1.LoadBalancerPolicy, t string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			if c.Status == metav1.ConditionTrue {
				return "True"
			}
			return string(c.Status) + " (" + c.Reason + ")"
		}
	}
	return "Unknown"
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t.Time)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
