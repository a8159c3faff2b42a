package lbctl

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Human output formats: the command's table (or text, for answers that are not rows) and the same with
// more columns. "text" is what diff and explain called their default before they shared these flags.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatText  = "text"
	formatName  = "name"
)

// outputFlags is the -o flag set every command shares (see the package comment). Machine formats are
// cli-runtime's printers (JSONPrinter, YAMLPrinter, NamePrinter, JSONPathPrinter, GoTemplatePrinter), so
// they print as kubectl's do; table and wide are cli-runtime's table printer over a metav1.Table, or the
// command's own text. The flags are parsed here rather than by genericclioptions.PrintFlags: that package
// links kustomize and the resource builder, and made lbctl 30 MB larger for nothing lbctl uses.
type outputFlags struct {
	output string
	// human is the printer for table and wide, made once per command run so that a watch prints the
	// header once, as kubectl get --watch does.
	human printers.ResourcePrinter
}

// formats are the -o values; jsonpath and go-template take their template after "=", as kubectl's do.
var formats = []string{formatTable, formatWide, "json", "yaml", formatName, "jsonpath=...", "jsonpath-as-json=...", "go-template=..."}

// addOutputFlags adds -o to cmd; def is the default format ("" is table).
func addOutputFlags(cmd *cobra.Command, def string) *outputFlags {
	o := &outputFlags{}
	cmd.Flags().StringVarP(&o.output, "output", "o", def, "Output format. One of: ("+strings.Join(formats, ", ")+").")
	cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{formatTable, formatWide, "json", "yaml", formatName, "jsonpath=", "jsonpath-as-json=", "go-template="},
			cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	return o
}

func (o *outputFlags) format() string { return o.output }

// isHuman reports whether the format is a table (or text) rather than a machine format.
func (o *outputFlags) isHuman() bool {
	switch o.format() {
	case "", formatTable, formatWide, formatText:
		return true
	}
	return false
}

// check refuses an unknown format or a broken template before the command does anything.
func (o *outputFlags) check() error {
	if o.isHuman() {
		return nil
	}
	_, err := o.printer()
	return err
}

// printer is the cli-runtime printer of a machine format.
func (o *outputFlags) printer() (printers.ResourcePrinter, error) {
	f := o.format()
	kind, tmpl, hasTmpl := strings.Cut(f, "=")
	switch {
	case f == "json":
		return &printers.JSONPrinter{}, nil
	case f == "yaml":
		return &printers.YAMLPrinter{}, nil
	case f == formatName:
		return &printers.NamePrinter{}, nil
	case hasTmpl && (kind == "jsonpath" || kind == "jsonpath-as-json"):
		p, err := printers.NewJSONPathPrinter(tmpl)
		if err != nil {
			return nil, fmt.Errorf("--output %s: %w", f, err)
		}
		p.AllowMissingKeys(true) // as kubectl's default --allow-missing-template-keys
		if kind == "jsonpath-as-json" {
			p.EnableJSONOutput(true)
		}
		return p, nil
	case hasTmpl && kind == "go-template":
		p, err := printers.NewGoTemplatePrinter([]byte(tmpl))
		if err != nil {
			return nil, fmt.Errorf("--output %s: %w", f, err)
		}
		p.AllowMissingKeys(true)
		return p, nil
	}
	return nil, fmt.Errorf("--output: unsupported value %q; supported: %s", f, strings.Join(formats, ", "))
}

// printable is one answer of a command, in every form the formats need.
type printable struct {
	// Object is what json, yaml, jsonpath and go-template print: a runtime.Object as it is (a policy or a
	// list of them), anything else as its JSON.
	Object any
	// Names are what -o name prints when Object is not a Kubernetes object ("kind/name" lines).
	Names []string
	// Table is what table and wide print (columns with Priority 1 only in wide); Text replaces it for
	// answers that are not rows. WithNamespace adds a NAMESPACE column (-A).
	Table         *metav1.Table
	Text          func(w io.Writer, wide bool) error
	WithNamespace bool
}

// Print writes p in the chosen format.
func (o *outputFlags) Print(w io.Writer, p printable) error {
	if o.isHuman() {
		wide := o.format() == formatWide
		if p.Text != nil {
			return p.Text(w, wide)
		}
		if p.Table == nil {
			return fmt.Errorf("--output %s: this command has no table; use json or yaml", o.format())
		}
		if o.human == nil {
			o.human = printers.NewTablePrinter(printers.PrintOptions{Wide: wide, WithNamespace: p.WithNamespace})
		}
		return o.human.PrintObj(p.Table, w)
	}
	if o.format() == formatName && p.Names != nil {
		for _, n := range p.Names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	}
	if o.format() == formatName && !namedObject(p.Object) {
		// cli-runtime's name printer would fail on an object with no kind and name, with an error about its
		// own internals.
		return fmt.Errorf("--output name: this command prints no named objects; use json, yaml, jsonpath or go-template")
	}
	pr, err := o.printer()
	if err != nil {
		return err
	}
	obj, err := toObject(p.Object)
	if err != nil {
		return err
	}
	// The name printer takes no typed lists: print each item, as kubectl get -o name does.
	if l, ok := obj.(*v1alpha1.LoadBalancerPolicyList); ok && o.format() == formatName {
		for i := range l.Items {
			if err := pr.PrintObj(policyObject(&l.Items[i]), w); err != nil {
				return err
			}
		}
		return nil
	}
	return pr.PrintObj(obj, w)
}

// namedObject reports whether v is something -o name can print: a policy or a list of them.
func namedObject(v any) bool {
	switch v.(type) {
	case *v1alpha1.LoadBalancerPolicy, *v1alpha1.LoadBalancerPolicyList:
		return true
	}
	return false
}

// toObject makes v printable by cli-runtime: policies keep their type (with apiVersion and kind set, as the
// printers need), anything else becomes its JSON.
func toObject(v any) (runtime.Object, error) {
	switch v := v.(type) {
	case *v1alpha1.LoadBalancerPolicy:
		return policyObject(v), nil
	case *v1alpha1.LoadBalancerPolicyList:
		v.APIVersion, v.Kind = v1alpha1.APIVersion, "LoadBalancerPolicyList"
		return v, nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		// Lists print as kubectl prints them (kind List, the rows under items), so that jsonpath written for
		// get ({.items[*]...}) works on every command that lists. A nil list is an empty one.
		items := v
		if rv.IsNil() {
			items = []any{}
		}
		v = struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Items      any    `json:"items"`
		}{"v1", "List", items}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}, nil
}

func policyObject(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	p.APIVersion, p.Kind = v1alpha1.APIVersion, v1alpha1.Kind
	return p
}

// policyName is a policy as -o name prints it, as kubectl does.
func policyName(name string) string {
	return "loadbalancerpolicy." + v1alpha1.GroupVersion.Group + "/" + name
}

// policyList wraps items as the list kubectl get -o json|yaml prints.
func policyList(items []*v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicyList {
	l := &v1alpha1.LoadBalancerPolicyList{}
	l.Items = make([]v1alpha1.LoadBalancerPolicy, 0, len(items))
	for _, p := range items {
		l.Items = append(l.Items, *p)
	}
	return l
}
