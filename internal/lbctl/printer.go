package lbctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
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

// outputFlags is the -o flag set every command shares (see the package comment). Machine formats (json,
// yaml, name, jsonpath, go-template) are cli-runtime's printers, so they behave as kubectl's do; table and
// wide are cli-runtime's table printer over a metav1.Table, or the command's own text.
type outputFlags struct {
	print *genericclioptions.PrintFlags
	// human is the printer for table and wide, made once per command run so that a watch prints the
	// header once, as kubectl get --watch does.
	human printers.ResourcePrinter
}

// addOutputFlags adds -o (and --template, --allow-missing-template-keys) to cmd; def is the default format.
func addOutputFlags(cmd *cobra.Command, def string) *outputFlags {
	o := &outputFlags{print: genericclioptions.NewPrintFlags("").WithDefaultOutput(def)}
	o.print.AddFlags(cmd)
	// cli-runtime's own help lists only its formats; these commands also print tables.
	cmd.Flags().Lookup("output").Usage = "Output format. One of: (" + strings.Join(o.allowed(), ", ") + ")."
	cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.allowed(), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	return o
}

func (o *outputFlags) allowed() []string {
	return append([]string{formatTable, formatWide}, o.print.AllowedFormats()...)
}

func (o *outputFlags) format() string { return *o.print.OutputFormat }

// human reports whether the format is a table (or text) rather than a machine format.
func (o *outputFlags) isHuman() bool {
	switch o.format() {
	case "", formatTable, formatWide, formatText:
		return true
	}
	return false
}

// check refuses an unknown format before the command does anything.
func (o *outputFlags) check() error {
	if o.isHuman() {
		return nil
	}
	if _, err := o.print.ToPrinter(); err != nil {
		return fmt.Errorf("--output: unsupported value %q; supported: %s", o.format(), strings.Join(o.allowed(), ", "))
	}
	return nil
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
	pr, err := o.print.ToPrinter()
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
