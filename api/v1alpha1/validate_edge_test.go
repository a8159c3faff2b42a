package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateEdge(t *testing.T) {
	yes := true
	runCases(t, map[string]validateCase{
		"every override in range": {func(p *v1alpha1.LoadBalancerPolicy) {
			l := &p.Spec.Listener
			l.Limits = &v1alpha1.ListenerLimits{MaxConnections: i32(100), ConnectionBufferBytes: i32(16384), MaxRequestHeadersKB: i32(8), MaxHeadersCount: i32(20)}
			l.Timeouts = &v1alpha1.ListenerTimeouts{RequestHeaders: &metav1.Duration{Duration: time.Second}}
			l.HTTP2 = &v1alpha1.ListenerHTTP2{Enabled: &yes, MaxConcurrentStreams: i32(10), InitialStreamWindowSize: i32(65535)}
			l.Requests = &v1alpha1.ListenerRequests{HeadersWithUnderscores: v1alpha1.UnderscoresDrop, EscapedSlashes: v1alpha1.EscapedSlashesReject}
			p.Spec.Backends[0].Connection = &v1alpha1.Connection{BufferBytes: i32(4096)}
		}, nil},
		"out of range": {func(p *v1alpha1.LoadBalancerPolicy) {
			l := &p.Spec.Listener
			l.Limits = &v1alpha1.ListenerLimits{MaxConnections: i32(0), ConnectionBufferBytes: i32(10)}
			l.Timeouts = &v1alpha1.ListenerTimeouts{RequestHeaders: &metav1.Duration{Duration: 0}}
			l.HTTP2 = &v1alpha1.ListenerHTTP2{InitialStreamWindowSize: i32(1000)}
			p.Spec.Backends[0].Connection = &v1alpha1.Connection{BufferBytes: i32(1)}
		}, []string{
			`spec.listener.limits.maxConnections: must be between 1 and 1073741824, got 0`,
			`spec.listener.limits.connectionBufferBytes: must be between 1024 and 16777216, got 10`,
			`spec.listener.timeouts.requestHeaders: must be greater than zero`,
			`spec.listener.http2.initialStreamWindowSize: must be between 65535 and 2147483647, got 1000`,
			`spec.backends[0].connection.bufferBytes: must be between 1024 and 16777216, got 1`,
		}},
		"an access log in text for a sample": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.AccessLog = &v1alpha1.AccessLog{Format: v1alpha1.AccessLogText, SamplePercent: new(0.5)}
		}, nil},
		"an access log on a TCP listener": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Protocol = v1alpha1.ProtocolTCP
			p.Spec.Listener.AccessLog = &v1alpha1.AccessLog{}
		}, nil},
		"a bad access log": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.AccessLog = &v1alpha1.AccessLog{Format: "json", SamplePercent: new(0.0)}
		}, []string{
			`spec.listener.accessLog.format: unsupported value "json"; supported: JSON, Text`,
			`spec.listener.accessLog.samplePercent: must be above 0 and at most 100 (use disabled: true to log nothing), got 0`,
		}},
		"an access log turned off with a format": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.AccessLog = &v1alpha1.AccessLog{Disabled: true, SamplePercent: new(150.0)}
		}, []string{
			`spec.listener.accessLog.samplePercent: must be above 0 and at most 100 (use disabled: true to log nothing), got 150`,
			`spec.listener.accessLog: format and samplePercent have no effect with disabled: true`,
		}},
		"misspelled enums": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Listener.Requests = &v1alpha1.ListenerRequests{HeadersWithUnderscores: "reject", EscapedSlashes: "Redirect"}
		}, []string{
			`spec.listener.requests.headersWithUnderscores: unsupported value "reject"; supported: Reject, Drop, Allow`,
			`spec.listener.requests.escapedSlashes: unsupported value "Redirect"; supported: Keep, Reject, UnescapeAndRedirect, UnescapeAndForward`,
		}},
		"HTTP settings on TCP": {func(p *v1alpha1.LoadBalancerPolicy) {
			l := &p.Spec.Listener
			l.Protocol = v1alpha1.ProtocolTCP
			l.Limits = &v1alpha1.ListenerLimits{MaxConnections: i32(10), MaxHeadersCount: i32(5)}
			l.Timeouts = &v1alpha1.ListenerTimeouts{}
			l.HTTP2 = &v1alpha1.ListenerHTTP2{}
		}, []string{
			`spec.listener.limits: maxRequestHeadersKB and maxHeadersCount are not allowed on a TCP listener: TCP has no headers`,
			`spec.listener.timeouts: not allowed on a TCP listener: it applies to HTTP only`,
			`spec.listener.http2: not allowed on a TCP listener: it applies to HTTP only`,
		}},
	})
}
