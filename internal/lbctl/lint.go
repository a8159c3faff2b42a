package lbctl

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

func newLint() *cobra.Command {
	var file string
	var expected int
	var rules, grpc bool
	var addr *reachFlags
	cmd := &cobra.Command{
		Use:   "lint -f FILE|DIR|-",
		Short: "Find valid settings that probably do not do what is meant (exit 1 when there are findings)",
		Long: `Lint policies offline for the traps users of Envoy, Istio, nginx and HAProxy fall into. The same
checks run on every push (as warnings) and show in each policy's status.warnings. Findings never stop
a policy; invalid policies are reported as errors, as lbctl validate does.

With --grpc the policies are also checked for proxyless gRPC clients (grpc-go, grpc-java, grpc-c++ reading
xDS): what they would reject (grpc-refused: left out of what they are served) and what they ignore
(grpc-ignored). Status shows these for proxy groups that have a gRPC client connected.

Exit status: 0 when nothing was found, 1 when there are findings or errors.`,
		Example: `  lbctl lint -f policy.yaml
  lbctl lint -f policies/ --expected-concurrency 5000
  lbctl lint -f policy.yaml --grpc                   # the policy is also served to proxyless gRPC clients
  lbctl lint --rules`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			if rules {
				tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "RULE\tCATCHES")
				for _, r := range lint.Rules {
					fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Catches)
				}
				return tw.Flush()
			}
			if file == "" {
				return errors.New("-f is required (or --rules)")
			}
			docs, err := manifest.ReadPath(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			addrRules, err := addr.rules()
			if err != nil {
				return err
			}
			var errs []error
			findings := 0
			for _, d := range docs {
				p, fe := translate.Prepare(d.Policy, addrRules)
				if len(fe) > 0 {
					for _, e := range fe {
						errs = append(errs, fmt.Errorf("%s (%s): %s", objkey.Of(d.Policy), d.Source, e.Error()))
					}
					continue
				}
				if expected > 0 {
					if p.Annotations == nil {
						p.Annotations = map[string]string{}
					}
					p.Annotations[lint.ExpectedConcurrencyAnnotation] = strconv.Itoa(expected)
				}
				fs := lint.Check(p)
				if grpc {
					fs = append(fs, lint.GRPC(p)...)
				}
				for _, f := range fs {
					findings++
					fmt.Fprintf(w, "%s (%s): %s\n", objkey.Of(p), d.Source, f)
				}
			}
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			if findings > 0 {
				return &exitCode{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	cmd.Flags().IntVar(&expected, "expected-concurrency", 0, "concurrent requests each policy must carry; overrides the "+lint.ExpectedConcurrencyAnnotation+" annotation")
	cmd.Flags().BoolVar(&rules, "rules", false, "list the rules and what each catches")
	cmd.Flags().BoolVar(&grpc, "grpc", false, "also check what proxyless gRPC clients would reject or ignore (rules grpc-refused, grpc-ignored)")
	addr = addReachFlags(cmd)
	return cmd
}
