package lbctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// What lbctl looks for in a cluster, as charts/lbplane names it: the xds Service (it also serves the push
// API, on the port named api) is labelled app.kubernetes.io/part-of=lbplane (whatever the chart's
// nameOverride makes app.kubernetes.io/name) and named <fullname>-xds; the
// push API token is in the Secret <fullname>-api-token (key token); the CA that signs the API's certificate
// is ca.crt of <fullname>-ca (lbplane's own CA) or of <fullname>-xds-tls (cert-manager's issuer).
const (
	chartNameLabel   = "app.kubernetes.io/part-of=lbplane"
	chartServiceTail = "-xds"
	chartAPIPort     = "api"
	chartTokenTail   = "-api-token"
	chartTokenKey    = "token"
	chartCAKey       = "ca.crt"
)

var chartCASecretTails = []string{"-ca", "-xds-tls"}

// PortForward opens a local connection to port of a pod, as kubectl port-forward does, and returns the
// local address to dial; it is closed when ctx ends. The default is client-go's SPDY port-forward through
// the API server; tests replace it (there is no kubelet to forward to).
type PortForward func(ctx context.Context, cfg *rest.Config, namespace, pod string, port int) (string, error)

// Options change how lbctl reaches things; the zero value is what the lbctl binary uses.
type Options struct {
	// PortForward, when set, replaces the SPDY port-forward of Kubernetes mode.
	PortForward PortForward
}

// kubeFlags are Kubernetes mode's flags, kubectl's names for the kubeconfig (--kubeconfig, --context,
// --cluster, --user), and where lbplane runs. Kubernetes mode is on when --kubeconfig or --context is
// given, or when KUBECONFIG is set and no push API is configured (see globals.prepare). They are read with client-go's clientcmd rather than cli-runtime's ConfigFlags, which links the
// resource builder and kustomize (30 MB of lbctl) for flags lbctl does not have; -n and -A stay each
// command's own, and --server and --token the push API's.
type kubeFlags struct {
	kubeconfig, context, cluster, user string
	// lbplaneNamespace is where lbplane's chart is installed; empty: found by label in every namespace.
	lbplaneNamespace string
	portForward      PortForward
	// fromEnv: KUBECONFIG is set and nothing names a push API (no --server, LBPLANE_SERVER or token), so lbctl
	// goes where kubectl would.
	fromEnv bool

	conn *Cluster // connected once per run
}

// newKubeFlags adds the flags to the root's persistent flags.
func newKubeFlags(pf *pflag.FlagSet, o Options) *kubeFlags {
	k := &kubeFlags{portForward: o.PortForward}
	pf.StringVar(&k.kubeconfig, "kubeconfig", "", "Kubernetes mode: path to the kubeconfig file")
	pf.StringVar(&k.context, "context", "", "Kubernetes mode: the kubeconfig context to use")
	pf.StringVar(&k.cluster, "cluster", "", "Kubernetes mode: the kubeconfig cluster to use")
	pf.StringVar(&k.user, "user", "", "Kubernetes mode: the kubeconfig user to use")
	pf.StringVar(&k.lbplaneNamespace, "lbplane-namespace", "", "Kubernetes mode: the namespace lbplane's chart is installed in (default: found by its labels)")
	if k.portForward == nil {
		k.portForward = SPDYPortForward
	}
	return k
}

func (k *kubeFlags) enabled() bool {
	return k != nil && (k.kubeconfig != "" || k.context != "" || k.fromEnv)
}

// Cluster is lbplane in a Kubernetes cluster, reached the way kubectl reaches pods: its policies are read
// from the API server, and its push API through a port-forward to one of its pods, with the token and CA
// from the chart's Secrets. Any command (a dashboard, say) can use it through Connect.
type Cluster struct {
	REST *rest.Config
	// Namespace is the kubeconfig context's namespace: where commands look when -n is not given.
	Namespace string
	// Lbplane is where lbplane runs: its namespace, Service and the pod the port-forward goes to.
	LbplaneNamespace, Service, Pod string
	// Dynamic reads everything: typed clients (client-go's kubernetes package) would add 20 MB to lbctl
	// for the three kinds it reads.
	Dynamic dynamic.Interface

	opts   *kubeFlags
	client *pushclient.Client
}

// connect reads the kubeconfig the flags name; the push API is reached on the first call to Client.
func (k *kubeFlags) connect() (*Cluster, error) {
	if k.conn != nil {
		return k.conn, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.Context.Cluster, overrides.Context.AuthInfo = k.cluster, k.user
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "lbctl"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k.conn = &Cluster{REST: cfg, Namespace: ns, Dynamic: dyn, opts: k}
	return k.conn, nil
}

// Client returns a push API client that goes through a port-forward to an lbplane pod, authenticated with
// the chart's token and verifying the API's certificate against the chart's CA under the Service's name.
// The port-forward stays open until ctx ends.
func (c *Cluster) Client(ctx context.Context) (*pushclient.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	svc, err := c.findService(ctx)
	if err != nil {
		return nil, err
	}
	c.LbplaneNamespace, c.Service = svc.Namespace, svc.Name
	pod, err := c.findPod(ctx, svc)
	if err != nil {
		return nil, err
	}
	c.Pod = pod.Name
	port, err := apiPort(svc, pod)
	if err != nil {
		return nil, err
	}
	fullname := strings.TrimSuffix(svc.Name, chartServiceTail)
	token, err := c.secretKey(ctx, svc.Namespace, []string{fullname + chartTokenTail}, chartTokenKey)
	if err != nil {
		return nil, fmt.Errorf("the push API token: %w", err)
	}
	caPEM, err := c.secretKey(ctx, svc.Namespace, suffixed(fullname, chartCASecretTails), chartCAKey)
	if err != nil {
		return nil, fmt.Errorf("the CA of lbplane's API certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("the CA of lbplane's API certificate: no PEM certificate in %s", chartCAKey)
	}
	addr, err := c.opts.portForward(ctx, c.REST, svc.Namespace, pod.Name, port)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s:%d: %w", svc.Namespace, pod.Name, port, err)
	}
	// The certificate names the Service, not the forwarded local address.
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		ServerName: svc.Name + "." + svc.Namespace + ".svc"}}
	c.client = &pushclient.Client{BaseURL: "https://" + addr, Token: strings.TrimSpace(string(token)),
		HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	return c.client, nil
}

func suffixed(base string, tails []string) []string {
	out := make([]string, len(tails))
	for i, t := range tails {
		out[i] = base + t
	}
	return out
}

// findService finds the chart's xds Service: by label, with a port named api, in --lbplane-namespace or in
// every namespace the user may list.
func (c *Cluster) findService(ctx context.Context) (*corev1.Service, error) {
	ns := c.opts.lbplaneNamespace
	var list corev1.ServiceList
	err := c.list(ctx, servicesGVR, ns, chartNameLabel, &list)
	if err != nil {
		if apierrors.IsForbidden(err) && ns == "" {
			return nil, fmt.Errorf("finding lbplane: %w (name its namespace with --lbplane-namespace)", err)
		}
		return nil, fmt.Errorf("finding lbplane: %w", err)
	}
	var found []corev1.Service
	for _, s := range list.Items {
		if strings.HasSuffix(s.Name, chartServiceTail) && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == chartAPIPort }) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		where := "any namespace"
		if ns != "" {
			where = "namespace " + ns
		}
		return nil, fmt.Errorf("no lbplane found in %s: no Service labelled %s with a port named %s (is the chart installed?)", where, chartNameLabel, chartAPIPort)
	case 1:
		return &found[0], nil
	}
	var names []string
	for _, s := range found {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	return nil, fmt.Errorf("more than one lbplane (%s): choose one with --lbplane-namespace", strings.Join(names, ", "))
}

// findPod picks a running, ready pod behind the Service, the first by name so that repeated calls agree.
func (c *Cluster) findPod(ctx context.Context, svc *corev1.Service) (*corev1.Pod, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("the Service %s/%s selects no pods", svc.Namespace, svc.Name)
	}
	var pods corev1.PodList
	if err := c.list(ctx, podsGVR, svc.Namespace, labels.SelectorFromSet(svc.Spec.Selector).String(), &pods); err != nil {
		return nil, fmt.Errorf("finding lbplane's pods: %w", err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running, ready lbplane pod behind Service %s/%s (%d pods)", svc.Namespace, svc.Name, len(pods.Items))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// apiPort resolves the Service's api port to the pod's container port, as kubectl port-forward svc/... does.
func apiPort(svc *corev1.Service, pod *corev1.Pod) (int, error) {
	for _, sp := range svc.Spec.Ports {
		if sp.Name != chartAPIPort {
			continue
		}
		if sp.TargetPort.Type == intstr.Int {
			if sp.TargetPort.IntVal == 0 {
				return int(sp.Port), nil
			}
			return int(sp.TargetPort.IntVal), nil
		}
		for _, ct := range pod.Spec.Containers {
			for _, cp := range ct.Ports {
				if cp.Name == sp.TargetPort.StrVal {
					return int(cp.ContainerPort), nil
				}
			}
		}
		return 0, fmt.Errorf("pod %s/%s has no container port named %s", pod.Namespace, pod.Name, sp.TargetPort.StrVal)
	}
	return 0, fmt.Errorf("the Service %s/%s has no port named %s", svc.Namespace, svc.Name, chartAPIPort)
}

// secretKey returns key of the first of names that exists.
func (c *Cluster) secretKey(ctx context.Context, ns string, names []string, key string) ([]byte, error) {
	var errs []error
	for _, n := range names {
		s := &corev1.Secret{}
		if err := c.get(ctx, secretsGVR, ns, n, s); err != nil {
			errs = append(errs, fmt.Errorf("the Secret %s/%s: %w", ns, n, err))
			continue
		}
		if v := s.Data[key]; len(v) > 0 {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("the Secret %s/%s has no key %s", ns, n, key))
	}
	return nil, errors.Join(errs...)
}

// SPDYPortForward forwards a port on 127.0.0.1 (picked by the kernel) to port of the pod through the API
// server, as kubectl port-forward does.
func SPDYPortForward(ctx context.Context, cfg *rest.Config, namespace, pod string, port int) (string, error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	u.Path = path.Join(u.Path, cfg.APIPath, "api/v1/namespaces", namespace, "pods", pod, "portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesWithContext(ctx, dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, ready, io.Discard, io.Discard)
	if err != nil {
		return "", err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return "", err
	case <-ctx.Done():
		return "", ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		return "", fmt.Errorf("no local port: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local), nil
}

// policiesGVR is the resource of LoadBalancerPolicies.
var policiesGVR = v1alpha1.GroupVersion.WithResource("loadbalancerpolicies")

// List returns the cluster's policies in ns ("" for every namespace), sorted by namespace and name.
func (c *Cluster) List(ctx context.Context, ns string) ([]*v1alpha1.LoadBalancerPolicy, error) {
	l, err := c.Dynamic.Resource(policiesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.LoadBalancerPolicy, 0, len(l.Items))
	for _, u := range l.Items {
		p := &v1alpha1.LoadBalancerPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// Get returns one policy of the cluster.
func (c *Cluster) Get(ctx context.Context, ns, name string) (*v1alpha1.LoadBalancerPolicy, error) {
	u, err := c.Dynamic.Resource(policiesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.LoadBalancerPolicy{}
	return p, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p)
}

var (
	servicesGVR = corev1.SchemeGroupVersion.WithResource("services")
	podsGVR     = corev1.SchemeGroupVersion.WithResource("pods")
	secretsGVR  = corev1.SchemeGroupVersion.WithResource("secrets")
)

// list lists gvr in ns ("" for all) with a label selector into out, a typed list.
func (c *Cluster) list(ctx context.Context, gvr schema.GroupVersionResource, ns, selector string, out any) error {
	l, err := c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(l.UnstructuredContent(), out)
}

// get reads one object of gvr into out, a typed object.
func (c *Cluster) get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, out any) error {
	u, err := c.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}
