package gatewayapi

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
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

// Steering the rollouts of the host names an HTTPRoute's rules are served on, with the annotations a
// LoadBalancerPolicy is steered with in Kubernetes mode: apiwire.PausedAnnotation "true" on the route pauses
// them (and removing it resumes them); apiwire.AbortAnnotation set to the route's metadata.generation aborts
// them (every Envoy runs the baseline). A policy made here carries apiwire.PausedAnnotation "true" when one
// of its routes is paused, and GatewayRolloutAbort "true" when one of its routes aborts (its own generation
// is numbered after the translation, so the route's is checked here).
const GatewayRolloutAbort = "gateway.lbplane.io/rollout-abort"

// rolloutAsk is what an HTTPRoute's rollout annotations ask of the rollouts of the host names its rules are
// served on.
type rolloutAsk struct {
	// settings are those a change is staged with (nil: the route asks for no stages); immediate: it asks for
	// every Envoy at once; problem is what is wrong with AnnotationRollout's value (see routeRollout).
	settings  *v1alpha1.Rollout
	immediate bool
	problem   string
	// paused and abort steer the rollouts under way.
	paused, abort bool
	// key stands for the annotations in the key a policy is reused by (builtKey): metadata.generation does
	// not move with them.
	key string
}

// routeAsk reads the route's rollout annotations.
func routeAsk(r *gwv1.HTTPRoute) rolloutAsk {
	a := rolloutAsk{paused: r.Annotations[apiwire.PausedAnnotation] == "true",
		abort: r.Annotations[apiwire.AbortAnnotation] == strconv.FormatInt(r.Generation, 10)}
	a.settings, a.immediate, a.problem = routeRollout(r)
	a.key = fmt.Sprintf("%s\x00%t\x00%t", r.Annotations[AnnotationRollout], a.paused, a.abort)
	return a
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
