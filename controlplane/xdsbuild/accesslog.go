package xdsbuild

import (
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// MetadataNamespace is the filter_metadata key under which lbplane names, on each virtual host and cluster,
// the policy ("policy": "<namespace>/<name>") and, on clusters, the backend ("backend") it was built from.
// The access log reads it (%METADATA(VIRTUAL_HOST:lbplane:policy)%, %METADATA(CLUSTER:lbplane:backend)%).
const MetadataNamespace = "lbplane"

// sourceMetadata is the metadata lbplane puts on what it built from s. A cluster policies share has no
// policy (its source names the backend alone): the access log reads the policy from the virtual host.
func sourceMetadata(s ir.Source) *corev3.Metadata {
	fields := map[string]*structpb.Value{}
	if s.Name != "" {
		fields["policy"] = structpb.NewStringValue(objkey.Key{Namespace: s.Namespace, Name: s.Name}.String())
	}
	if s.Backend != "" {
		fields["backend"] = structpb.NewStringValue(s.Backend)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataNamespace: {Fields: fields}}}
}

// The fields of an access log line (docs/operations.md, "Access logs"). A value Envoy does not have (no
// route matched, no endpoint picked) is null in JSON and "-" in text.
var (
	httpLogFields = [][2]string{
		{"start_time", "%START_TIME%"},
		{"policy", "%METADATA(VIRTUAL_HOST:lbplane:policy)%"},
		{"route", "%ROUTE_NAME%"},
		{"backend", "%METADATA(CLUSTER:lbplane:backend)%"},
		{"cluster", "%UPSTREAM_CLUSTER%"},
		{"endpoint", "%UPSTREAM_HOST%"},
		{"client", "%DOWNSTREAM_REMOTE_ADDRESS%"},
		{"method", "%REQ(:METHOD)%"},
		{"authority", "%REQ(:AUTHORITY)%"},
		{"path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"},
		{"protocol", "%PROTOCOL%"},
		{"status", "%RESPONSE_CODE%"},
		{"response_flags", "%RESPONSE_FLAGS%"},
		{"details", "%RESPONSE_CODE_DETAILS%"},
		{"bytes_received", "%BYTES_RECEIVED%"},
		{"bytes_sent", "%BYTES_SENT%"},
		{"duration_ms", "%DURATION%"},
		{"upstream_ms", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"},
		{"user_agent", "%REQ(USER-AGENT)%"},
	}
	tcpLogFields = [][2]string{
		{"start_time", "%START_TIME%"},
		{"policy", "%METADATA(CLUSTER:lbplane:policy)%"},
		{"backend", "%METADATA(CLUSTER:lbplane:backend)%"},
		{"cluster", "%UPSTREAM_CLUSTER%"},
		{"endpoint", "%UPSTREAM_HOST%"},
		{"client", "%DOWNSTREAM_REMOTE_ADDRESS%"},
		{"response_flags", "%RESPONSE_FLAGS%"},
		{"bytes_received", "%BYTES_RECEIVED%"},
		{"bytes_sent", "%BYTES_SENT%"},
		{"duration_ms", "%DURATION%"},
	}
)

// Text lines: Envoy's default format, then lbplane's fields as key=value.
const (
	httpTextFormat = `[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" listener=@LISTENER@ policy=%METADATA(VIRTUAL_HOST:lbplane:policy)% route=%ROUTE_NAME% backend=%METADATA(CLUSTER:lbplane:backend)%` + "\n"
	tcpTextFormat  = `[%START_TIME%] %DOWNSTREAM_REMOTE_ADDRESS% "%UPSTREAM_HOST%" %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% listener=@LISTENER@ policy=%METADATA(CLUSTER:lbplane:policy)% backend=%METADATA(CLUSTER:lbplane:backend)%` + "\n"
)

// accessLogs returns the listener's access log: to Envoy's standard output, in the listener's format, for
// a sample of its requests (connections) when it says so; nil when it logs nothing.
func accessLogs(l *ir.Listener) []*accesslogv3.AccessLog {
	a := l.AccessLog
	if !a.Logs() {
		return nil
	}
	tcp := l.Protocol == ir.TCP
	format := &corev3.SubstitutionFormatString{}
	if a.Format == ir.AccessLogText {
		text := httpTextFormat
		if tcp {
			text = tcpTextFormat
		}
		// The listener's name is a literal: it has no % of its own (listener names are protocol-port).
		format.Format = &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: strings.Replace(text, "@LISTENER@", l.Name, 1)}}}
	} else {
		fields := httpLogFields
		if tcp {
			fields = tcpLogFields
		}
		m := map[string]*structpb.Value{"listener": structpb.NewStringValue(l.Name)}
		for _, f := range fields {
			m[f[0]] = structpb.NewStringValue(f[1])
		}
		format.Format = &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: &structpb.Struct{Fields: m}}
	}
	out := &accesslogv3.AccessLog{Name: "envoy.access_loggers.stdout", ConfigType: &accesslogv3.AccessLog_TypedConfig{
		TypedConfig: mustAny(&streamv3.StdoutAccessLog{AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: format}})}}
	if n := a.SamplePerMillion; n > 0 && n < 1_000_000 {
		// Each request on its own chance (not by x-request-id, which lbplane's listeners do not generate). The
		// runtime key lets an operator change the share on one Envoy through its runtime, without lbplane.
		out.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_RuntimeFilter{RuntimeFilter: &accesslogv3.RuntimeFilter{
			RuntimeKey:               "lbplane.access_log." + l.Name + ".sample",
			PercentSampled:           &typev3.FractionalPercent{Numerator: n, Denominator: typev3.FractionalPercent_MILLION},
			UseIndependentRandomness: true,
		}}}
	}
	return []*accesslogv3.AccessLog{out}
}
