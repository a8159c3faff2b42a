package v1alpha1_test

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateBackendFeatures(t *testing.T) {
	runCases(t, map[string]validateCase{
		"outlier detection off": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Disabled: true}}
		}, nil},
		"outlier detection off with a detector": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].HealthCheck = &v1alpha1.HealthCheck{Passive: &v1alpha1.PassiveHealthCheck{Disabled: true, Consecutive5xx: i32(3)}}
		}, []string{`spec.backends[0].healthCheck.passive.disabled: no detector may be set with disabled: true`}},
	})
}

func TestValidatePathAndHostKeys(t *testing.T) {
	runCases(t, map[string]validateCase{
		"path and host on HTTP": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev,
				HashKeys: []v1alpha1.HashKey{{Path: &v1alpha1.PathHashKey{}}, {Host: &v1alpha1.HostHashKey{}}}}
		}, nil},
		"two inputs in one key": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev,
				HashKeys: []v1alpha1.HashKey{{Path: &v1alpha1.PathHashKey{}, Host: &v1alpha1.HostHashKey{}}}}
		}, []string{`spec.backends[0].loadBalancing.hashKeys[0]: set exactly one of header, cookie, sourceIP, queryParameter, path and host, got 2`}},
		"path on TCP": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol = v1alpha1.ProtocolTCP
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev,
				HashKeys: []v1alpha1.HashKey{{Path: &v1alpha1.PathHashKey{}}}}
		}, []string{`spec.backends[0].loadBalancing.hashKeys[0]: path and host are HTTP keys: a TCP listener can hash only sourceIP`}},
	})
}

func TestValidateHashBalanceFactor(t *testing.T) {
	runCases(t, map[string]validateCase{
		"with Maglev": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, HashBalanceFactor: i32(150)}
		}, nil},
		"with RoundRobin": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{HashBalanceFactor: i32(150)}
		}, []string{`spec.backends[0].loadBalancing.hashBalanceFactor: only allowed with algorithm RingHash or Maglev, got "RoundRobin": other algorithms do not hash`}},
		"below the mean": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRingHash, HashBalanceFactor: i32(99)}
		}, []string{`spec.backends[0].loadBalancing.hashBalanceFactor: must be between 100 and 10000, got 99`}},
	})
}

func TestValidateBackups(t *testing.T) {
	runCases(t, map[string]validateCase{
		"a backup and a threshold": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].Endpoints = append(p.Spec.Backends[0].Endpoints, v1alpha1.Endpoint{Address: "10.9.9.9", Port: 80, Backup: true})
			p.Spec.Backends[0].LoadBalancing.FailoverThreshold = i32(100)
		}, nil},
		"only backups": {func(p *v1alpha1.LoadBalancerPolicy) {
			for i := range p.Spec.Backends[0].Endpoints {
				p.Spec.Backends[0].Endpoints[i].Backup = true
			}
		}, []string{`spec.backends[0].endpoints: every endpoint is a backup: at least one must not be, or nothing is preferred`}},
		"a threshold with nothing to fail over to": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing.FailoverThreshold = i32(50)
		}, []string{`spec.backends[0].loadBalancing.failoverThreshold: only allowed with backup endpoints or zoneFailover: without them there is no next level to fail over to`}},
	})
}

func TestValidateDrainingSessions(t *testing.T) {
	runCases(t, map[string]validateCase{
		"Move": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].DrainingSessions = v1alpha1.DrainingSessionsMove
		}, nil},
		"HAProxy's word": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].DrainingSessions = "redispatch"
		}, []string{`spec.backends[0].drainingSessions: unsupported value "redispatch"; supported: Keep, Move`}},
	})
}
