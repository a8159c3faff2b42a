package kubesource

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// ServiceFieldManager is the field manager of the Envoy Service's ports lbplane keeps (server-side apply):
// it owns those ports, and only them.
const ServiceFieldManager = "lbplane"

// EnvoyService keeps the ports of the Service in front of a proxy group's Envoys in step with the listener
// ports of the group's policies (the chart's envoy.service.managedPorts).
type EnvoyService struct {
	Namespace, Name string
	// Group is the proxy group the Service's Envoys serve.
	Group string
	// Interval is how often the ports are compared with what is served (1 s when 0); Resync how often they
	// are applied anyway, to put back a port someone removed (5 m when 0).
	Interval, Resync time.Duration
}

// ServicePorts returns the ports lbplane gives the Envoy Service for these listeners: one per listener port
// that none of the others' ports (those another field manager set: the chart's envoy.service.ports)
// targets already, with the listener's port as the Service's, named <protocol>-<port> (http, https, tcp),
// with an appProtocol for HTTP and HTTPS, sorted by port.
func ServicePorts(listeners []*ir.Listener, others []corev1.ServicePort) []corev1.ServicePort {
	targeted := map[int32]bool{}
	taken := map[int32]bool{}
	for _, p := range others {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			taken[p.Port] = true
			if p.TargetPort.Type == intstr.Int {
				targeted[p.TargetPort.IntVal] = true
			}
		}
	}
	var out []corev1.ServicePort
	for _, l := range listeners {
		port := int32(l.Port)
		if targeted[port] || taken[port] {
			continue
		}
		proto, app := "tcp", ""
		switch {
		case l.Protocol == ir.HTTP && l.TLS != nil:
			proto, app = "https", "https"
		case l.Protocol == ir.HTTP:
			proto, app = "http", "http"
		}
		sp := corev1.ServicePort{Name: fmt.Sprintf("%s-%d", proto, port), Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
		if app != "" {
			sp.AppProtocol = &app
		}
		out = append(out, sp)
		taken[port] = true
	}
	slices.SortFunc(out, func(a, b corev1.ServicePort) int { return int(a.Port - b.Port) })
	return out
}

// ownedPorts returns the (port, protocol) keys of the Service ports that manager applied, from the
// Service's managedFields.
func ownedPorts(svc *corev1.Service, manager string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, mf := range svc.ManagedFields {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec struct {
				Ports map[string]json.RawMessage `json:"f:ports"`
			} `json:"f:spec"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			return nil, err
		}
		for k := range fields.Spec.Ports {
			key, ok := strings.CutPrefix(k, "k:")
			if !ok {
				continue
			}
			var id struct {
				Port     int32  `json:"port"`
				Protocol string `json:"protocol"`
			}
			if err := json.Unmarshal([]byte(key), &id); err != nil {
				return nil, err
			}
			out[portKey(id.Port, id.Protocol)] = true
		}
	}
	return out, nil
}

func portKey(port int32, protocol string) string {
	if protocol == "" {
		protocol = string(corev1.ProtocolTCP)
	}
	return fmt.Sprintf("%d/%s", port, protocol)
}

// keepServicePorts applies, on the elected replica, the ports ServicePorts gives the Envoy Service whenever
// they change, and every Resync. A Service that is not there is not created: it is the chart's.
func (s *Source) keepServicePorts(ctx context.Context) error {
	es := s.EnvoyService
	client, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	interval, resync := es.Interval, es.Resync
	if interval <= 0 {
		interval = time.Second
	}
	if resync <= 0 {
		resync = 5 * time.Minute
	}
	log := s.Log.With("service", objkey.Key{Namespace: es.Namespace, Name: es.Name}.String(), "group", es.Group)
	// wanted is every listener port the group had when the ports were last applied (covered by another
	// manager's port or not: that is what changes), shown the ports the Service got then.
	var wanted, shown []corev1.ServicePort
	var appliedAt time.Time
	var lastErr string
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, _ := s.Engine.Result()
		var listeners []*ir.Listener
		if res != nil {
			if g := res.IR.Groups[es.Group]; g != nil {
				listeners = g.Listeners
			}
		}
		want := ServicePorts(listeners, nil)
		if !appliedAt.IsZero() && time.Since(appliedAt) < resync && samePorts(want, wanted) {
			continue
		}
		svc, err := client.CoreV1().Services(es.Namespace).Get(ctx, es.Name, metav1.GetOptions{})
		if err == nil {
			var ports []corev1.ServicePort
			if ports, err = s.applyServicePorts(ctx, client, svc, listeners); err == nil {
				if appliedAt.IsZero() || !samePorts(ports, shown) {
					log.Info("the Envoy Service's ports follow the policies' listeners", "ports", portNames(ports))
				}
				wanted, shown, appliedAt, lastErr = want, ports, time.Now(), ""
				continue
			}
		}
		if msg := err.Error(); msg != lastErr {
			if apierrors.IsNotFound(err) {
				log.Warn("the Envoy Service is not there; its ports are not kept until it is")
			} else {
				log.Error("keeping the Envoy Service's ports", "error", err)
			}
			lastErr = msg
		}
	}
}

// applyServicePorts applies the ports lbplane gives svc for these listeners, and returns them.
func (s *Source) applyServicePorts(ctx context.Context, client kubernetes.Interface, svc *corev1.Service, listeners []*ir.Listener) ([]corev1.ServicePort, error) {
	owned, err := ownedPorts(svc, ServiceFieldManager)
	if err != nil {
		return nil, fmt.Errorf("reading the Service's managed fields: %w", err)
	}
	var others []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if !owned[portKey(p.Port, string(p.Protocol))] {
			others = append(others, p)
		}
	}
	ports := ServicePorts(listeners, others)
	spec := corev1ac.ServiceSpec()
	for _, p := range ports {
		ac := corev1ac.ServicePort().WithName(p.Name).WithPort(p.Port).WithTargetPort(p.TargetPort).WithProtocol(p.Protocol)
		if p.AppProtocol != nil {
			ac = ac.WithAppProtocol(*p.AppProtocol)
		}
		spec = spec.WithPorts(ac)
	}
	apply := corev1ac.Service(svc.Name, svc.Namespace).WithSpec(spec)
	_, err = client.CoreV1().Services(svc.Namespace).Apply(ctx, apply, metav1.ApplyOptions{FieldManager: ServiceFieldManager, Force: true})
	return ports, err
}

func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool { return x.Name == y.Name && x.Port == y.Port })
}

func portNames(ports []corev1.ServicePort) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = p.Name
	}
	return out
}
