package lbctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

func newTranslate() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "translate -f FILE|DIR|-",
		Short: "Print the Envoy resources policies become, offline, by proxy group and xDS type",
		Example: `  lbctl translate -f examples/round-robin.yaml
  lbctl translate -f policies/ -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := manifest.ReadPath(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			res, errs := translateDocs(docs)
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			out := map[string]map[string][]any{}
			groups := make([]string, 0, len(res.IR.Groups))
			for name := range res.IR.Groups {
				groups = append(groups, name)
			}
			slices.Sort(groups)
			for _, name := range groups {
				r, err := xdsbuild.Build(res.IR.Groups[name])
				if err != nil {
					return fmt.Errorf("group %s: %w", name, err)
				}
				out[name] = map[string][]any{}
				for _, typ := range xdsbuild.Types {
					for _, m := range r[typ] {
						b, err := protojson.Marshal(xdsbuild.Redacted(m))
						if err != nil {
							return err
						}
						var v any
						json.Unmarshal(b, &v)
						out[name][typ] = append(out[name][typ], v)
					}
				}
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				b, _ := json.MarshalIndent(out, "", "  ")
				fmt.Fprintln(w, string(b))
			case "", "yaml":
				b, err := yaml.Marshal(out)
				if err != nil {
					return err
				}
				w.Write(b)
			default:
				return fmt.Errorf("--output: unsupported value %q; supported: yaml, json", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "yaml or json")
	cmd.MarkFlagRequired("filename")
	return cmd
}
