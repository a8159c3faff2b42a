package translate_test

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbplane/lbplane/controlplane/translate"
)

// A terminating endpoint drains while it serves (its sessions stay on it) and is left out once it does not.
func TestEndpointConditions(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name               string
		c                  discoveryv1.EndpointConditions
		ready, terminating bool
	}{
		{"ready", discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no}, true, false},
		{"no conditions", discoveryv1.EndpointConditions{}, true, false},
		{"not ready", discoveryv1.EndpointConditions{Ready: &no, Serving: &no, Terminating: &no}, false, false},
		{"terminating, serving", discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes}, false, true},
		{"terminating, no longer serving", discoveryv1.EndpointConditions{Ready: &no, Serving: &no, Terminating: &yes}, false, false},
		{"terminating, serving unknown", discoveryv1.EndpointConditions{Ready: &no, Terminating: &yes}, false, true},
	} {
		ready, terminating := translate.EndpointConditions(tc.c)
		if ready != tc.ready || terminating != tc.terminating {
			t.Errorf("%s: ready %v, terminating %v; want %v, %v", tc.name, ready, terminating, tc.ready, tc.terminating)
		}
	}
}
