package lbctl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

func newExplain(g *globals) *cobra.Command {
	var namespace, file string
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "explain NAME",
		Short: "Trace a policy through lbplane: its fields with defaults, the IR, and the Envoy field each became",
		Long: `Show how one policy becomes Envoy config: every policy field with its value (defaults
included), the intermediate representation lbplane built from it, the Envoy resources it contributes to,
and for each field the Envoy resource, field path (as in Envoy's API docs) and value it became.

Without -f it asks the server about the policy it serves; with -f it translates the files offline.`,
		Example: `  lbctl explain demo
  lbctl explain health -f examples/health-checks.yaml
  lbctl explain demo -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ns := g.namespaceFor(cmd, namespace)
			var e *explain.Explanation
			var err error
			if file != "" {
				e, err = offlineExplain(file, ns, args[0], cmd.InOrStdin())
			} else {
				var c *pushclient.Client
				if c, err = g.client(); err == nil {
					e, err = c.Explain(cmd.Context(), ns, args[0])
				}
			}
			if err != nil {
				return err
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: e, Names: []string{policyName(args[0])},
				Text: func(w io.Writer, _ bool) error { return printExplanation(w, e) }})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME (Kubernetes mode: the context's, unless given)")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "translate these files offline instead of asking the server")
	out = addOutputFlags(cmd, "")
	return cmd
}

func offlineExplain(file, namespace, name string, stdin io.Reader) (*explain.Explanation, error) {
	docs, err := manifest.ReadPath(file, stdin)
	if err != nil {
		return nil, err
	}
	res, errs := translateDocs(docs, previewRules)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	k := objkey.Key{Namespace: namespace, Name: name}
	for _, d := range docs {
		if objkey.Of(d.Policy) == k {
			return explain.Policy(d.Policy, res.Policies.Of(k), res, nil)
		}
	}
	return nil, fmt.Errorf("policy %s is not in %s", k, file)
}

func printExplanation(w io.Writer, e *explain.Explanation) error {
	state := "served"
	if !e.Accepted {
		state = "not served: " + e.Message
	}
	fmt.Fprintf(w, "Policy %s, proxy group %s (%s)\n\n", e.Policy, e.ProxyGroup, state)
	if len(e.Resources) > 0 {
		fmt.Fprintln(w, "Envoy resources:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, r := range e.Resources {
			fmt.Fprintf(tw, "  %s\t%s\n", r.Type, r.Name)
		}
		tw.Flush()
		b, err := yaml.Marshal(readable(reflect.ValueOf(e.IR)))
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "\nIR:")
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY FIELD\tVALUE\tENVOY FIELD\tENVOY VALUE")
	for _, f := range e.Fields {
		target, value := f.Note, ""
		if f.Resource != nil {
			target = fmt.Sprintf("%s %s: %s", f.Resource.Type, f.Resource.Name, f.Envoy)
			value = f.EnvoyValue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Policy, clipValue(f.Value), target, clipValue(value))
	}
	return tw.Flush()
}
