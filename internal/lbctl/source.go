package lbctl

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// policySource is where get, status NAME and completion read policies: the push API (standalone) or the
// cluster's LoadBalancerPolicy objects (Kubernetes mode).
type policySource interface {
	// List returns the policies of ns, or of every namespace when ns is "".
	List(ctx context.Context, ns string) ([]*v1alpha1.LoadBalancerPolicy, error)
	Get(ctx context.Context, ns, name string) (*v1alpha1.LoadBalancerPolicy, error)
}

// apiPolicies reads policies from the push API, which lists every namespace at once.
type apiPolicies struct{ c *pushclient.Client }

func (a apiPolicies) List(ctx context.Context, ns string) ([]*v1alpha1.LoadBalancerPolicy, error) {
	all, err := a.c.List(ctx)
	if err != nil || ns == "" {
		return all, err
	}
	var out []*v1alpha1.LoadBalancerPolicy
	for _, p := range all {
		if p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

func (a apiPolicies) Get(ctx context.Context, ns, name string) (*v1alpha1.LoadBalancerPolicy, error) {
	return a.c.Get(ctx, ns, name)
}

// policies returns where this run reads policies from.
func (g *globals) policies() (policySource, error) {
	if g.kube.enabled() {
		return g.kube.connect()
	}
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	return apiPolicies{c}, nil
}

// namespaceFor is the namespace a command works in: its -n, or in Kubernetes mode when -n is not given,
// the kubeconfig context's namespace, as kubectl does.
func (g *globals) namespaceFor(cmd *cobra.Command, flagValue string) string {
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
		return flagValue
	}
	if g.kube.enabled() {
		if c, err := g.kube.connect(); err == nil && c.Namespace != "" {
			return c.Namespace
		}
	}
	return flagValue
}

// Connect returns lbplane in the cluster the Kubernetes flags name, for commands that need more than
// g.client() (which already goes through it in Kubernetes mode). It fails when Kubernetes mode is off.
func (g *globals) Connect() (*Cluster, error) {
	if !g.kube.enabled() {
		return nil, errNotKube
	}
	return g.kube.connect()
}
