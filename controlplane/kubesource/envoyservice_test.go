package kubesource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// On a real API server, the Envoy Service of a proxy group gets a port for every listener port of the
// group's policies that none of its own ports (Helm's: another field manager) targets, named after the
// listener's protocol; a port goes when no policy listens there any more, one that someone removes comes
// back, and the Service's own ports, and other groups' listeners, are never touched.
func TestEnvoyServicePortsFollowTheListeners(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := c.Client

	// The Service as the chart renders it: port 80 in front of listener port 10080, created by Helm.
	envoySvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-lbplane-envoy", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "envoy"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(10080), Protocol: corev1.ProtocolTCP}}}}
	if err := cl.Create(ctx, envoySvc, client.FieldOwner("helm")); err != nil {
		t.Fatal(err)
	}
	app := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if err := cl.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	policy := func(name, group string, port int32, proto v1alpha1.Protocol) *v1alpha1.LoadBalancerPolicy {
		return &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{ProxyGroup: group,
				Listener: v1alpha1.Listener{Port: port, Protocol: proto},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: "app", Port: 80}}}}}
	}
	for _, p := range []*v1alpha1.LoadBalancerPolicy{
		policy("web", "default", 10080, v1alpha1.ProtocolHTTP), // targeted by Helm's port 80: no port of its own
		policy("alt", "default", 8080, v1alpha1.ProtocolHTTP),
		policy("db", "default", 5432, v1alpha1.ProtocolTCP),
		policy("other", "edge", 9090, v1alpha1.ProtocolHTTP), // another group's
	} {
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	src := &kubesource.Source{Config: c.Config, Engine: engine.New(cache, log), Tracker: xdsserver.NewTracker(cache, log), Log: log,
		StatusInterval: 200 * time.Millisecond,
		EnvoyService:   kubesource.EnvoyService{Namespace: "default", Name: envoySvc.Name, Group: "default", Interval: 50 * time.Millisecond, Resync: time.Second}}
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = src.Run(ctx) }()

	// ports returns the Service's ports as "name port->target appProtocol", in its order.
	ports := func() string {
		var svc corev1.Service
		if err := cl.Get(ctx, client.ObjectKeyFromObject(envoySvc), &svc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range svc.Spec.Ports {
			app := ""
			if p.AppProtocol != nil {
				app = " " + *p.AppProtocol
			}
			out = append(out, fmt.Sprintf("%s %d->%s%s", p.Name, p.Port, p.TargetPort.String(), app))
		}
		slices.Sort(out)
		return strings.Join(out, ", ")
	}
	waitPorts := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			got := ports()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the Service's ports are %q, want %q", what, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPorts("first sync", "http 80->10080, http-8080 8080->8080 http, tcp-5432 5432->5432")

	// A policy on a new port, then one port's last policy gone.
	if err := cl.Create(ctx, policy("admin", "default", 9443, v1alpha1.ProtocolTCP)); err != nil {
		t.Fatal(err)
	}
	waitPorts("a new listener port", "http 80->10080, http-8080 8080->8080 http, tcp-5432 5432->5432, tcp-9443 9443->9443")
	if err := cl.Delete(ctx, policy("alt", "default", 0, "")); err != nil {
		t.Fatal(err)
	}
	waitPorts("a listener port without policies", "http 80->10080, tcp-5432 5432->5432, tcp-9443 9443->9443")

	// Someone removes lbplane's port by hand (an update: another manager): it comes back at the resync.
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKeyFromObject(envoySvc), &svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = slices.DeleteFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 5432 })
	if err := cl.Update(ctx, &svc, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitPorts("a port removed by hand", "http 80->10080, tcp-5432 5432->5432, tcp-9443 9443->9443")
}

// ServicePorts gives a port to each listener port that no other port targets or takes, named after the
// protocol, with TLS as https.
func TestServicePortsSkipTargetedAndTakenPorts(t *testing.T) {
	others := []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromInt32(10080)},
		{Name: "metrics", Port: 9000, TargetPort: intstr.FromString("metrics")},
		{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(10053), Protocol: corev1.ProtocolUDP},
	}
	got := kubesource.ServicePorts(servicePortListeners(t), others)
	var names []string
	for _, p := range got {
		app := ""
		if p.AppProtocol != nil {
			app = "/" + *p.AppProtocol
		}
		names = append(names, fmt.Sprintf("%s:%d->%s%s", p.Name, p.Port, p.TargetPort.String(), app))
	}
	// 10080 is targeted by port 80 and 9000 taken by the metrics port; UDP's 53 takes no TCP port.
	if want := "tcp-53:53->53 https-8443:8443->8443/https"; strings.Join(names, " ") != want {
		t.Errorf("ServicePorts = %s, want %s", strings.Join(names, " "), want)
	}
}

func servicePortListeners(t *testing.T) []*ir.Listener {
	t.Helper()
	return []*ir.Listener{
		{Port: 10080, Protocol: ir.HTTP},
		{Port: 9000, Protocol: ir.TCP},
		{Port: 8443, Protocol: ir.HTTP, TLS: &ir.ListenerTLS{}},
		{Port: 53, Protocol: ir.TCP},
	}
}
