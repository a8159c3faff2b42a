package lbctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

func newTranslate() *cobra.Command {
	var file string
	var outF *outputFlags
	cmd := &cobra.Command{
		Use:   "translate -f FILE|DIR|-",
		Short: "Print the Envoy resources policies become, offline, by proxy group and xDS type",
		Example: `  lbctl translate -f examples/round-robin.yaml
  lbctl translate -f policies/ -o json
  lbctl translate -f policies/ -o table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outF.check(); err != nil {
				return err
			}
			docs, err := manifest.ReadPath(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			res, errs := translateDocs(docs, previewRules)
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			out := map[string]map[string][]any{}
			outFlags := outF
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
			var names []string
			for _, group := range groups {
				for _, typ := range xdsbuild.Types {
					for _, m := range out[group][typ] {
						names = append(names, shortType(typ)+"/"+resourceName(m))
					}
				}
			}
			return outFlags.Print(cmd.OutOrStdout(), printable{Object: out, Names: names, Table: resourceTable(out, groups)})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	outF = addOutputFlags(cmd, "yaml")
	cmd.MarkFlagRequired("filename")
	return cmd
}

// shortType is a type URL's last name: Cluster, Listener, ...
func shortType(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

// resourceTable lists the resources: one row each, by group and type.
func resourceTable(out map[string]map[string][]any, groups []string) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Group", Type: "string"},
		{Name: "Type", Type: "string"},
		{Name: "Name", Type: "string", Format: "name"},
	}}
	for _, g := range groups {
		for _, typ := range xdsbuild.Types {
			for _, m := range out[g][typ] {
				t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{g, shortType(typ), resourceName(m)}})
			}
		}
	}
	return t
}

// resourceName is a resource's name; endpoints are named by their cluster.
func resourceName(m any) string {
	r, _ := m.(map[string]any)
	if n, ok := r["name"].(string); ok {
		return n
	}
	n, _ := r["clusterName"].(string)
	return n
}
