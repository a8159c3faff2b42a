package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKubernetesHealthEventsOnThePolicy: in Kubernetes mode an ejection an Envoy reports is also a Kubernetes
// Event on the policy (kubectl describe lbp / kubectl get events show it), as well as in lbplane's history.
func TestKubernetesHealthEventsOnThePolicy(t *testing.T) {
	t.Parallel()
	k := startKubeEnv(t, "k1", "k2")
	k.apply(t, kubeObjects, k.endpoints("ready", "ready"))
	k.apply(t, kubePolicy, map[string]any{"Name": "web", "Port": k.port})
	waitServing(t, k.url, "k1", "k2")
	// k1 starts terminating: Envoy drains it, and says so on its stats port.
	k.apply(t, kubeObjects, k.endpoints("terminating", "ready"))
	drained := k.hosts["k1"].IP + ":8080"
	eventually(t, 30*time.Second, "a Kubernetes Event on the policy names the drained endpoint", func() error {
		out, err := kubectl(t, k.cluster.Kubeconfig, "", "get", "events", "-n", "default", "--field-selector",
			"involvedObject.kind=LoadBalancerPolicy,involvedObject.name=web", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var l struct {
			Items []struct {
				Type, Reason, Message string
				Source                struct{ Component string }
				InvolvedObject        struct{ APIVersion, Kind, Name, Namespace, UID string }
			}
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			return err
		}
		for _, e := range l.Items {
			if e.Reason == "EndpointEjected" && e.Type == "Warning" && strings.Contains(e.Message, drained) && strings.Contains(e.Message, "draining") &&
				strings.Contains(e.Message, "envoy-k8s") && e.Source.Component == "lbplane" && e.InvolvedObject.UID != "" &&
				e.InvolvedObject.APIVersion == "lbplane.io/v1alpha1" {
				t.Logf("event: %+v", e)
				return nil
			}
		}
		return fmt.Errorf("no EndpointEjected event for %s: %s", drained, out)
	})
	out, err := kubectl(t, k.cluster.Kubeconfig, "", "describe", "lbp", "web")
	if err != nil || !strings.Contains(out, "EndpointEjected") {
		t.Errorf("kubectl describe lbp web shows no event: %v\n%s", err, out)
	}
}
