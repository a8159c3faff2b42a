package lbctl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

func newGet(g *globals) *cobra.Command {
	var namespace string
	var all bool
	var w watchFlags
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "get [NAME|gateway/NAME]",
		Short: "List policies, or show one, with their status",
		Long: `List policies, or show one, with their status. In Kubernetes mode (--kubeconfig or --context) the
policies are the cluster's LoadBalancerPolicy objects, and beside them, when the cluster has Gateways, the
policies lbplane made of those (asked of lbplane); otherwise lbplane's push API answers.

A Gateway's policies (one per listener port and host name, named gateway.GATEWAY.PORT.HASH) are lbplane's,
not objects of the cluster: gateway/NAME lists those of the Gateway NAME, asked of lbplane in Kubernetes
mode too, and -o wide shows the Gateway and listener of each.

--watch prints the list again whenever it changes, until Ctrl-C (or --watch-timeout, --watch-max).`,
		Example: `  lbctl get
  lbctl get demo -o yaml
  lbctl get -A -o wide
  lbctl get -o jsonpath='{.items[*].metadata.name}'
  lbctl get --watch
  lbctl --context prod get -n shop
  lbctl get gateway/web -n shop -o wide`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			src, err := g.policies()
			if err != nil {
				return err
			}
			ns := g.namespaceFor(cmd, namespace)
			if all {
				ns = ""
			}
			var tgt target
			if len(args) == 1 {
				if tgt, err = parseTarget(args[0]); err != nil {
					return err
				}
			}
			fetch := func(ctx context.Context) (printable, error) {
				switch {
				case tgt.gateway != "":
					gps, err := serverGatewayPolicies(ctx, g, types.NamespacedName{Namespace: ns, Name: tgt.gateway})
					if err != nil {
						return printable{}, err
					}
					items := make([]*v1alpha1.LoadBalancerPolicy, len(gps))
					for i, gp := range gps {
						items[i] = gp.policy
					}
					return policiesPrintable(items, false, all), nil
				case tgt.policy != "":
					p, err := getPolicy(ctx, g, src, ns, tgt.policy)
					if err != nil {
						return printable{}, err
					}
					return policiesPrintable([]*v1alpha1.LoadBalancerPolicy{p}, true, all), nil
				}
				items, err := src.List(ctx, ns)
				if err != nil {
					return printable{}, err
				}
				if g.kube.enabled() {
					items = append(items, kubeGatewayPolicies(ctx, g, ns, cmd.ErrOrStderr())...)
					slices.SortFunc(items, func(a, b *v1alpha1.LoadBalancerPolicy) int { return objkey.Compare(objkey.Of(a), objkey.Of(b)) })
				}
				if len(items) == 0 && out.isHuman() && !w.on {
					where := "namespace " + ns
					if all {
						where = "any namespace"
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "No policies found in %s.\n", where)
				}
				return policiesPrintable(items, false, all), nil
			}
			return w.run(cmd, out, fetch)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace (Kubernetes mode: the context's, unless given)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	out = addOutputFlags(cmd, "")
	w.add(cmd)
	return cmd
}

// kubeGatewayPolicies are, in Kubernetes mode, the policies lbplane made of the Gateways in ns ("" for every
// namespace): lbplane's, not objects of the cluster, so they are asked of lbplane, and only when the cluster
// has a Gateway there. When lbplane cannot be asked, a line on w says so and the list goes on without them.
func kubeGatewayPolicies(ctx context.Context, g *globals, ns string, w io.Writer) []*v1alpha1.LoadBalancerPolicy {
	c, err := g.kube.connect()
	if err != nil {
		return nil
	}
	gws, err := c.Dynamic.Resource(gatewayGVR).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(gws.Items) == 0 {
		return nil // no Gateway API in the cluster, or no Gateway: no policy of one
	}
	var out []*v1alpha1.LoadBalancerPolicy
	client, err := g.client()
	if err == nil {
		var all []*v1alpha1.LoadBalancerPolicy
		if all, err = (apiPolicies{client}).List(ctx, ns); err == nil {
			for _, p := range all {
				if _, ok := gatewayapi.ServedBy(p); ok {
					out = append(out, p)
				}
			}
			return out
		}
	}
	fmt.Fprintf(w, "The policies of Gateways are lbplane's, and lbplane could not be asked for them: %v\n", err)
	return nil
}

// policiesPrintable is policies in every output form: one policy or a list for json and yaml, and the table
// kubectl get lbp prints, plus proxy group, hostnames, backends and healthy endpoints in wide.
func policiesPrintable(items []*v1alpha1.LoadBalancerPolicy, single, withNamespace bool) printable {
	p := printable{Table: policyTable(items), WithNamespace: withNamespace}
	if single && len(items) == 1 {
		p.Object = items[0]
	} else {
		p.Object = policyList(items)
	}
	return p
}

func policyTable(items []*v1alpha1.LoadBalancerPolicy) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Protocol", Type: "string"},
		{Name: "Port", Type: "integer"},
		{Name: "Algorithm", Type: "string"},
		{Name: "Accepted", Type: "string"},
		{Name: "Programmed", Type: "string"},
		{Name: "Endpoints", Type: "integer"},
		{Name: "Age", Type: "string"},
		{Name: "Proxy Group", Type: "string", Priority: 1},
		{Name: "Hostnames", Type: "string", Priority: 1},
		{Name: "Backends", Type: "string", Priority: 1},
		{Name: "Healthy", Type: "integer", Priority: 1},
		// A Gateway's policy: its Gateway, and the listeners (name:port) whose requests it serves.
		{Name: "Gateway", Type: "string", Priority: 1},
		{Name: "Listeners", Type: "string", Priority: 1},
	}}
	for _, p := range items {
		// The algorithm and group in effect, defaults applied, are the server's (status), as kubectl's column.
		algo := string(p.Status.Algorithm)
		var backends []string
		for _, b := range p.Spec.Backends {
			backends = append(backends, b.Name)
		}
		group := p.Status.ProxyGroup
		gateway, listeners := "-", "-"
		if sv, ok := gatewayapi.ServedBy(p); ok {
			gateway = sv.Gateway.String()
			listeners = strings.Join(mapStrings(sv.Listeners, func(l string) string { return fmt.Sprintf("%s:%d", l, sv.Port) }), ",")
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{p.Name, string(p.Spec.Listener.Protocol), p.Spec.Listener.Port, algo,
				condition(p, v1alpha1.ConditionAccepted), condition(p, v1alpha1.ConditionProgrammed), p.Status.Endpoints.Total,
				age(p.CreationTimestamp), group, dashList(p.Spec.Listener.Hostnames), dashList(backends), p.Status.Endpoints.Healthy,
				gateway, cmp.Or(listeners, "-")},
			Object: runtime.RawExtension{Object: p},
		})
	}
	return t
}

func dashList(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
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

// now is the clock ages are measured against; tests fix it so that tables compare byte for byte.
var now = time.Now

func age(t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
