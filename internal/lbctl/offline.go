package lbctl

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Offline predictions (trace, whatif -f; diff --traffic --from) read LoadBalancerPolicies and, beside them,
// the Kubernetes objects lbplane makes policies of or resolves: Gateway API objects (GatewayClass, Gateway,
// HTTPRoute, ReferenceGrant), BackendLoadBalancerPolicies, and the Services, EndpointSlices, Namespaces and
// TLS Secrets they name. The Gateways become policies through the same pure translation lbplane serve runs
// (gatewayapi.Translate), with serve's defaults: proxy group default, Envoy ports 20000-20999.

// Offline defaults of what lbplane serve --gateway-api is told (its flags' defaults).
const (
	offlineGatewayGroup   = "default"
	offlineGatewayAddress = "0.0.0.0"
	offlineGatewayPorts   = 20000 // to 20999
)

// objKey names one Kubernetes object of the files.
type objKey struct{ kind, namespace, name string }

// offlineObjects are the documents of -f files: policies, and the other kinds offline predictions read.
type offlineObjects struct {
	docs []manifest.Document
	// objects in the order read; a later one of the same kind, namespace and name replaces an earlier one.
	keys    []objKey
	objects map[objKey]any
	// notes are what was read but left out (kinds lbplane does not serve), said on standard error.
	notes []string
}

// offlineKinds are the kinds besides LoadBalancerPolicy, by apiVersion and kind, with a new object of each.
var offlineKinds = map[[2]string]func() any{
	{gwv1.GroupVersion.String(), "GatewayClass"}:                  func() any { return &gwv1.GatewayClass{} },
	{gwv1.GroupVersion.String(), "Gateway"}:                       func() any { return &gwv1.Gateway{} },
	{gwv1.GroupVersion.String(), "HTTPRoute"}:                     func() any { return &gwv1.HTTPRoute{} },
	{gwv1.GroupVersion.String(), "ReferenceGrant"}:                func() any { return &gwv1.ReferenceGrant{} },
	{gwv1.GroupName + "/v1beta1", "ReferenceGrant"}:               func() any { return &gwv1.ReferenceGrant{} },
	{v1alpha1.GroupVersion.String(), "BackendLoadBalancerPolicy"}: func() any { return &v1alpha1.BackendLoadBalancerPolicy{} },
	{"v1", "Service"}:   func() any { return &corev1.Service{} },
	{"v1", "Namespace"}: func() any { return &corev1.Namespace{} },
	{"v1", "Secret"}:    func() any { return &corev1.Secret{} },
	{discoveryv1.SchemeGroupVersion.String(), "EndpointSlice"}: func() any { return &discoveryv1.EndpointSlice{} },
}

// readOfflineObjects reads file (a file, a directory or - for standard input) as -f does.
func readOfflineObjects(file string, stdin io.Reader) (*offlineObjects, error) {
	o := &offlineObjects{objects: map[objKey]any{}}
	docs, err := manifest.ReadPathWith(file, stdin, o.take)
	o.docs = append(docs, o.docs...) // the policies of Lists come after
	return o, err
}

// take decodes a document of one of offlineKinds, strictly, and keeps it; a List (kubectl get -o yaml)
// is read item by item.
func (o *offlineObjects) take(source, apiVersion, kind string, b []byte) (bool, error) {
	if apiVersion == "v1" && kind == "List" {
		return true, o.takeList(source, b)
	}
	mk := offlineKinds[[2]string{apiVersion, kind}]
	if mk == nil {
		if strings.HasPrefix(apiVersion, gwv1.GroupName+"/") {
			o.notes = append(o.notes, fmt.Sprintf("%s: %s %s is not served by lbplane: left out", source, apiVersion, kind))
			return true, nil
		}
		return false, nil
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		return true, fmt.Errorf("%s %s: %w", apiVersion, kind, err)
	}
	meta := obj.(metav1.Object)
	if meta.GetName() == "" {
		return true, fmt.Errorf("%s: metadata.name: required", kind)
	}
	if kind != "GatewayClass" && kind != "Namespace" && meta.GetNamespace() == "" {
		meta.SetNamespace(v1alpha1.DefaultNamespace)
	}
	k := objKey{kind, meta.GetNamespace(), meta.GetName()}
	if _, ok := o.objects[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.objects[k] = obj
	return true, nil
}

// replacedBy is o with next's documents replacing or joining its own, as applying next would.
func (o *offlineObjects) replacedBy(next *offlineObjects) *offlineObjects {
	out := &offlineObjects{objects: map[objKey]any{}, notes: append(slices.Clone(o.notes), next.notes...)}
	replaced := map[objkey.Key]bool{}
	for _, d := range next.docs {
		replaced[objkey.Of(d.Policy)] = true
	}
	out.docs = slices.Clone(next.docs)
	for _, d := range o.docs {
		if !replaced[objkey.Of(d.Policy)] {
			out.docs = append(out.docs, d)
		}
	}
	for _, src := range []*offlineObjects{o, next} {
		for _, k := range src.keys {
			if _, ok := out.objects[k]; !ok {
				out.keys = append(out.keys, k)
			}
			out.objects[k] = src.objects[k]
		}
	}
	return out
}

// takeList reads the items of a List: policies, and the kinds take reads.
func (o *offlineObjects) takeList(source string, b []byte) error {
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("v1 List: %w", err)
	}
	var errs []error
	for i, item := range l.Items {
		at := fmt.Sprintf("items[%d]", i)
		src := source + "." + at
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(item, &head); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		if head.Kind == v1alpha1.Kind {
			d, err := manifest.DecodeDocument(item)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at, err))
				continue
			}
			d.Source = src
			o.docs = append(o.docs, d)
			continue
		}
		took, err := o.take(src, head.APIVersion, head.Kind, item)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		case !took:
			// What kubectl get lists beside them (Pods, Deployments): nothing lbplane makes policies of.
			o.notes = append(o.notes, fmt.Sprintf("%s: %s %s: left out", src, head.APIVersion, head.Kind))
		}
	}
	return errors.Join(errs...)
}

// kube tells whether the files hold Kubernetes objects: Services then resolve from them, and Gateways
// become policies.
func (o *offlineObjects) kube() bool { return len(o.keys) > 0 }

// offlineSet is what files hold, translated offline.
type offlineSet struct {
	res *translate.Result
	// policies are the files' LoadBalancerPolicies and the Gateways' policies.
	policies []*v1alpha1.LoadBalancerPolicy
	// gateways is the Gateway API translation; nil when the files hold no Gateway.
	gateways *gatewayapi.Output
	objs     *offlineObjects
}

// readOffline reads and translates file; what was left out is said on stderr.
func readOffline(file string, stdin io.Reader, stderr io.Writer) (*offlineSet, error) {
	o, err := readOfflineObjects(file, stdin)
	if err != nil {
		return nil, err
	}
	o.warn(stderr)
	return o.translate(), nil
}

func (o *offlineObjects) warn(w io.Writer) {
	for _, n := range o.notes {
		fmt.Fprintln(w, "warning: "+n)
	}
}

// translate turns the objects into policies and translates them all, Services resolved from the files'
// EndpointSlices.
func (o *offlineObjects) translate() *offlineSet {
	s := &offlineSet{objs: o, policies: manifest.Policies(o.docs)}
	if !o.kube() {
		s.res = translatePolicies(s.policies)
		return s
	}
	in := o.gatewayInput()
	refs := translate.Refs{Services: map[translate.ServiceRef]translate.ServiceEndpoints{}, Secrets: map[translate.SecretRef]translate.TLSSecret{},
		Granted: map[objkey.Key]bool{}}
	if len(in.Gateways) > 0 {
		s.gateways = gatewayapi.Translate(in)
		taken := map[objkey.Key]bool{}
		for _, p := range s.policies {
			taken[objkey.Of(p)] = true
		}
		for _, p := range s.gateways.Policies {
			// A LoadBalancerPolicy of the same name wins, as in lbplane serve.
			if k := objkey.Of(p); !taken[k] {
				s.policies = append(s.policies, p)
				refs.Granted[k] = true
			}
		}
	}
	for _, p := range s.policies {
		for _, b := range p.Spec.Backends {
			if b.Service != nil {
				ref := translate.ServiceRefOf(cmp.Or(p.Namespace, v1alpha1.DefaultNamespace), b.Service)
				refs.Services[ref] = o.endpoints(ref)
			}
		}
		for _, ref := range translate.SecretRefs(p) {
			refs.Secrets[ref] = o.secret(ref)
		}
	}
	s.res = translateOffline(s.policies, refs)
	return s
}

// gatewayInput is the Gateway API translation's input, as lbplane serve --gateway-api reads it with its
// default flags. A GatewayClass a Gateway names that the files do not hold is taken to be lbplane's, so
// that a file of Gateways and HTTPRoutes alone is served as it would be.
func (o *offlineObjects) gatewayInput() gatewayapi.Input {
	in := gatewayapi.Input{ProxyGroup: offlineGatewayGroup, Address: offlineGatewayAddress,
		Namespaces: map[string]map[string]string{}, Services: map[types.NamespacedName][]int32{}, PortNames: map[types.NamespacedName]map[int32]string{}}
	for p := range int32(1000) {
		in.Ports = append(in.Ports, offlineGatewayPorts+p)
	}
	classes := map[string]bool{}
	for _, k := range o.keys {
		switch obj := o.objects[k].(type) {
		case *gwv1.GatewayClass:
			in.Classes = append(in.Classes, obj)
			classes[obj.Name] = true
		case *gwv1.Gateway:
			in.Gateways = append(in.Gateways, obj)
		case *gwv1.HTTPRoute:
			in.Routes = append(in.Routes, obj)
		case *gwv1.ReferenceGrant:
			in.Grants = append(in.Grants, obj)
		case *v1alpha1.BackendLoadBalancerPolicy:
			in.BackendPolicies = append(in.BackendPolicies, obj)
		case *corev1.Namespace:
			in.Namespaces[obj.Name] = obj.Labels
		case *corev1.Service:
			in.AddService(obj)
		}
		if _, ok := in.Namespaces[k.namespace]; !ok && k.namespace != "" {
			in.Namespaces[k.namespace] = nil
		}
	}
	for _, g := range in.Gateways {
		if name := string(g.Spec.GatewayClassName); !classes[name] {
			classes[name] = true
			in.Classes = append(in.Classes, &gwv1.GatewayClass{TypeMeta: g.TypeMeta, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.ControllerName}})
			in.Classes[len(in.Classes)-1].Name = name
		}
	}
	in.Secret = func(ref types.NamespacedName) string {
		r := translate.SecretRef(ref)
		return o.secret(r).Problem(r)
	}
	return in
}

// endpoints resolves a Service port from the files, as lbplane does from the cluster: the Service's port,
// and the ready (and terminating) addresses of its EndpointSlices.
func (o *offlineObjects) endpoints(ref translate.ServiceRef) translate.ServiceEndpoints {
	svc, _ := o.objects[objKey{"Service", ref.Namespace, ref.Name}].(*corev1.Service)
	if svc == nil {
		return translate.ServiceEndpoints{Err: fmt.Sprintf("Service %s/%s is not in the files", ref.Namespace, ref.Name)}
	}
	var endpointSlices []*discoveryv1.EndpointSlice
	for _, k := range o.keys {
		if sl, ok := o.objects[k].(*discoveryv1.EndpointSlice); ok && sl.Namespace == ref.Namespace && sl.Labels[discoveryv1.LabelServiceName] == ref.Name {
			endpointSlices = append(endpointSlices, sl)
		}
	}
	return translate.EndpointsOfService(ref, svc, endpointSlices)
}

// secret is a TLS Secret of the files.
func (o *offlineObjects) secret(ref translate.SecretRef) translate.TLSSecret {
	s, _ := o.objects[objKey{"Secret", ref.Namespace, ref.Name}].(*corev1.Secret)
	if s == nil {
		return translate.TLSSecret{Err: fmt.Sprintf("Secret %s/%s is not in the files", ref.Namespace, ref.Name)}
	}
	if s.Type != corev1.SecretTypeTLS {
		return translate.TLSSecret{Err: fmt.Sprintf("Secret %s/%s is not of type %s", ref.Namespace, ref.Name, corev1.SecretTypeTLS)}
	}
	return translate.TLSSecret{Cert: s.Data[corev1.TLSCertKey], Key: s.Data[corev1.TLSPrivateKeyKey]}
}

// policy is the policy namespace/name of the set, a file's or a Gateway's.
func (s *offlineSet) policy(namespace, name string) *v1alpha1.LoadBalancerPolicy {
	k := objkey.Key{Namespace: namespace, Name: name}
	for _, p := range s.policies {
		if objkey.Of(p) == k {
			return p
		}
	}
	return nil
}

// gatewayPolicies are the policies the Gateway namespace/name became.
func (s *offlineSet) gatewayPolicies(gw types.NamespacedName) []*v1alpha1.LoadBalancerPolicy {
	var out []*v1alpha1.LoadBalancerPolicy
	for _, p := range s.policies {
		if sv, ok := gatewayapi.ServedBy(p); ok && sv.Gateway == gw {
			out = append(out, p)
		}
	}
	return out
}

// translateOffline translates policies with refs, reading the files they name as lbctl validate does, with
// the offline previews' address rules.
func translateOffline(policies []*v1alpha1.LoadBalancerPolicy, refs translate.Refs) *translate.Result {
	refs.Files = translate.Files{}
	for _, path := range translate.ReferencedFiles(policies) {
		if data, err := os.ReadFile(path); err != nil {
			refs.Files[path] = translate.File{Err: err.Error()}
		} else {
			refs.Files[path] = translate.File{Data: data}
		}
	}
	refs.Reach = previewRules
	return translate.Translate(policies, refs)
}
