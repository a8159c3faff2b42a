package lbctl

import (
	"io"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// SetNow fixes the clock ages are measured against, until the returned function restores it.
func SetNow(t time.Time) (restore func()) {
	old := now
	now = func() time.Time { return t }
	return func() { now = old }
}

// GatewayPolicies are the policies the files' Gateways become offline, as lbctl trace -f makes them.
func GatewayPolicies(file string) ([]*v1alpha1.LoadBalancerPolicy, error) {
	set, err := readOffline(file, nil, io.Discard)
	if err != nil {
		return nil, err
	}
	if set.gateways == nil {
		return nil, nil
	}
	return set.gateways.Policies, nil
}
