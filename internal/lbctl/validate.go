package lbctl

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
)

func newValidate() *cobra.Command {
	var file string
	var addr *reachFlags
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|-",
		Short: "Check policies offline: every field error, and conflicts between the given policies",
		Example: `  lbctl validate -f examples/
  lbctl validate -f policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, rerr := manifest.ReadPath(file, cmd.InOrStdin())
			var errs []error
			if rerr != nil {
				errs = append(errs, rerr)
			}
			rules, err := addr.rules()
			if err != nil {
				return err
			}
			res, derrs := translateDocs(docs, rules)
			errs = append(errs, derrs...)
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d policies valid\n", res.Policies.Len())
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	addr = addReachFlags(cmd)
	cmd.MarkFlagRequired("filename")
	return cmd
}

// translateDocs translates documents offline and returns every field error and conflict, one per policy
// problem, named by source.
func translateDocs(docs []manifest.Document, rules reach.Rules) (*translate.Result, []error) {
	var policies []*v1alpha1.LoadBalancerPolicy
	source := map[objkey.Key]string{}
	var errs []error
	for _, d := range docs {
		k := objkey.Of(d.Policy)
		if prev, dup := source[k]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also defined in %s", d.Source, k, prev))
			continue
		}
		source[k] = d.Source
		policies = append(policies, d.Policy)
	}
	files := translate.Files{}
	for _, path := range translate.ReferencedFiles(policies) {
		data, err := os.ReadFile(path)
		if err != nil {
			files[path] = translate.File{Err: err.Error()}
		} else {
			files[path] = translate.File{Data: data}
		}
	}
	res := translate.Translate(policies, translate.Refs{Files: files, Reach: rules})
	keys := make([]objkey.Key, 0, res.Policies.Len())
	for k := range res.Policies.All() {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b objkey.Key) int { return cmpString(source[a], source[b]) })
	for _, k := range keys {
		r := res.Policies.Of(k)
		switch {
		case len(r.Errors) > 0:
			for _, e := range r.Errors {
				errs = append(errs, fmt.Errorf("%s (%s): %s", k, source[k], e.Error()))
			}
		case !r.Accepted:
			errs = append(errs, fmt.Errorf("%s (%s): %s", k, source[k], r.AcceptedMessage))
		case !r.ResolvedRefs && r.ResolvedRefsReason == translate.ReasonInvalidRef:
			errs = append(errs, fmt.Errorf("%s (%s): %s", k, source[k], r.ResolvedRefsMessage))
		}
	}
	return res, errs
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
