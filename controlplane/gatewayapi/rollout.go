package gatewayapi

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// AnnotationRollout on an HTTPRoute says how a change of its rules reaches the Envoys:
//   - "staged": in stages, with the default stages, bake time and analysis of spec.rollout;
//   - a YAML or JSON object with the fields of a LoadBalancerPolicy's spec.rollout other than trafficShift
//     (stages, bakeTime, analysis): in stages, with those;
//   - "immediate": every Envoy at once, even when lbplane serve --rollout-default is staged.
//
// The unit of a rollout is one host name of one Gateway port (one policy made here): a change to any route
// served there is staged when one of those routes asks for stages, with the settings of the first of them
// in precedence order.
const AnnotationRollout = "gateway.lbplane.io/rollout"

// RouteConditionRolledOut is the condition of an HTTPRoute's parent (status.parents[]) that says where the
// staged rollouts of the host names serving its rules stand: True once the last change of each has
// reached every Envoy through its stages; False while one is progressing or paused, or after one was rolled
// back or aborted (the reason is that phase). An HTTPRoute none of whose host names was ever staged has
// none.
const RouteConditionRolledOut = "lbplane.io/RolledOut"

// Values of AnnotationRollout besides a settings object.
const (
	RolloutStaged    = "staged"
	RolloutImmediate = "immediate"
)

// Steering the rollouts of the host names an HTTPRoute's rules are served on, as a LoadBalancerPolicy's are
// steered in Kubernetes mode: AnnotationRolloutPaused "true" on the route pauses them (and removing it
// resumes them); AnnotationRolloutAbort set to the route's metadata.generation aborts them (every Envoy
// runs the baseline). A policy made here carries AnnotationRolloutPaused "true" when one of its routes is
// paused, and GatewayRolloutAbort "true" when one of its routes aborts.
const (
	AnnotationRolloutPaused = "lbplane.io/rollout-paused"
	AnnotationRolloutAbort  = "lbplane.io/rollout-abort"
	GatewayRolloutAbort     = "gateway.lbplane.io/rollout-abort"
)

// routeSteering reads the route's steering annotations: paused, and abort (it names the route's
// generation).
func routeSteering(r *gwv1.HTTPRoute) (paused, abort bool) {
	return r.Annotations[AnnotationRolloutPaused] == "true", r.Annotations[AnnotationRolloutAbort] == strconv.FormatInt(r.Generation, 10)
}

// routeRollout reads r's AnnotationRollout: the settings a change of its rules is staged with (nil: the
// route does not ask for stages), whether it asks for every Envoy at once, and what is wrong with the value
// (its rules are then staged with the default settings: a route that asked for stages never gets a change
// everywhere at once for want of a well-formed value).
func routeRollout(r *gwv1.HTTPRoute) (ro *v1alpha1.Rollout, immediate bool, problem string) {
	v, ok := r.Annotations[AnnotationRollout]
	if !ok {
		return nil, false, ""
	}
	switch strings.TrimSpace(v) {
	case RolloutStaged:
		return &v1alpha1.Rollout{}, false, ""
	case RolloutImmediate:
		return nil, true, ""
	}
	field := "metadata.annotations[" + AnnotationRollout + "]"
	var parsed v1alpha1.Rollout
	if err := yaml.UnmarshalStrict([]byte(v), &parsed); err != nil {
		return &v1alpha1.Rollout{}, false, fmt.Sprintf("%s: want %q, %q or the fields of spec.rollout (stages, bakeTime, analysis): %v", field, RolloutStaged, RolloutImmediate, err)
	}
	if parsed.TrafficShift != nil {
		return &v1alpha1.Rollout{}, false, field + ".trafficShift: not supported for HTTPRoutes (a traffic shift names a backend of a LoadBalancerPolicy)"
	}
	// Checked as the rollout of a policy, by the rules of spec.rollout, with the annotation's field path.
	probe := &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: "probe"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "service", Service: &v1alpha1.ServiceRef{Name: "service", Port: 80}}},
			Rollout:  parsed.DeepCopy(),
		},
	}
	v1alpha1.Default(probe)
	var problems []string
	for _, e := range v1alpha1.Validate(probe) {
		if !strings.HasPrefix(e.Path, "spec.rollout") {
			continue
		}
		problems = append(problems, strings.Replace(e.Path, "spec.rollout", field, 1)+": "+e.Msg)
	}
	if len(problems) > 0 {
		return &v1alpha1.Rollout{}, false, strings.Join(problems, "; ")
	}
	return &parsed, false, ""
}
