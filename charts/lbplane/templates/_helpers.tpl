{{- /* The chart's name (nameOverride) and the release's prefix of every object's name (fullnameOverride);
50 characters at most, so that the longest suffix (-envoy-metrics) keeps names within 63. */ -}}
{{- define "lbplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- define "lbplane.fullname" -}}
{{- $name := include "lbplane.name" . -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else if contains $name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- /* Every object's labels. app.kubernetes.io/part-of: lbplane stays whatever nameOverride says: lbctl finds
lbplane's Service by it. Selectors use only instance and component, which no value changes. */ -}}
{{- define "lbplane.labels" -}}
app.kubernetes.io/name: {{ include "lbplane.name" . }}
app.kubernetes.io/part-of: lbplane
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* An image reference: repository, the tag (default: the chart's appVersion for lbplane's image) and, when
set, the digest, which pins it (repository:tag@sha256:...). */ -}}
{{- define "lbplane.image" -}}
{{- $tag := .image.tag | default .default -}}
{{- .image.repository }}{{ with $tag }}:{{ . }}{{ end }}{{ with .image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{- define "lbplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "lbplane.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "lbplane.xdsHost" -}}
{{ include "lbplane.fullname" . }}-xds.{{ .Release.Namespace }}.svc
{{- end -}}

{{- /* Pod security shared by lbplane and Envoy: no root, no privilege escalation, a read-only root file system. */ -}}
{{- define "lbplane.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- /* The Envoy pod's containers' security: the chart's (lbplane.containerSecurity), with the keys
envoy.securityContext sets in their place (e.g. capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]} for ports
below 1024). */ -}}
{{- define "lbplane.envoySecurity" -}}
{{- toYaml (merge (deepCopy (.Values.envoy.securityContext | default dict)) (include "lbplane.containerSecurity" . | fromYaml)) -}}
{{- end -}}

{{- /* Envoy's heap budget for its overload actions (max_heap_size_bytes): 80 % of the container's memory
limit, so that Envoy sheds load (no new connection from 90 %, shrink heap, no keep-alive at 95 %, refuse requests at 98 %) before the
kernel kills it for memory; the other 20 % is Envoy's memory outside the heap, and slack. 1 GiB when the limit
is unset or not plain bytes or Ki, Mi, Gi, K, M, G. */ -}}
{{- define "lbplane.envoyMaxHeap" -}}
{{- $limit := "" -}}
{{- with .Values.envoy.resources -}}{{- with .limits -}}{{- $limit = toString (.memory | default "") -}}{{- end -}}{{- end -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "K" 1000 "M" 1000000 "G" 1000000000 "" 1 -}}
{{- $num := regexFind "^[0-9]+" $limit -}}
{{- $unit := trimPrefix $num $limit -}}
{{- if and $num (hasKey $units $unit) -}}
{{- div (mul (atoi $num) (get $units $unit)) 10 | mul 8 -}}
{{- else -}}1073741824{{- end -}}
{{- end -}}

{{- /* tcmalloc's soft limit (soft_memory_limit_bytes): 90 % of the heap budget, as lbctl bootstrap renders it:
above it tcmalloc gives freed memory back to the system at once. */ -}}
{{- define "lbplane.envoySoftHeap" -}}
{{- div (mul (atoi (include "lbplane.envoyMaxHeap" .)) 9) 10 -}}
{{- end -}}

{{- /* The Secret lbplane keeps its CA in, and the one it keeps the Envoys' group certificate in. */ -}}
{{- define "lbplane.caSecret" -}}
{{ include "lbplane.fullname" . }}-ca
{{- end -}}
{{- define "lbplane.envoySecret" -}}
{{ include "lbplane.fullname" . }}-envoy-tls
{{- end -}}

{{- /* cert-manager issues the certificates (mtls.certManager.issuerRef.name set) instead of lbplane's CA. */ -}}
{{- /* Each Envoy pod gets a certificate of its own from lbplane against its service account token
(mtls.envoyIdentity: pod, lbplane's own CA). */ -}}
{{- define "lbplane.podIdentity" -}}
{{- if and .Values.mtls.enabled .Values.envoy.enabled (not (include "lbplane.certManager" .)) (eq .Values.mtls.envoyIdentity "pod") -}}true{{- end -}}
{{- end -}}
{{- define "lbplane.envoyServiceAccount" -}}
{{ include "lbplane.fullname" . }}-envoy
{{- end -}}
{{- define "lbplane.caConfigMap" -}}
{{ include "lbplane.fullname" . }}-ca
{{- end -}}

{{- define "lbplane.certManager" -}}
{{- if and .Values.mtls.enabled .Values.mtls.certManager.issuerRef.name -}}true{{- end -}}
{{- end -}}
{{- /* The Secret cert-manager keeps lbplane's own (xDS and push API) certificate in. */ -}}
{{- define "lbplane.xdsSecret" -}}
{{ include "lbplane.fullname" . }}-xds-tls
{{- end -}}
{{- /* The xds Service's names: in lbplane's certificate, and what Envoys and lbctl connect to. */ -}}
{{- define "lbplane.xdsNames" -}}
{{- $svc := printf "%s-xds" (include "lbplane.fullname" .) -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{- /* Scheduling and pull secrets of a pod spec, from a values block (the top level for lbplane, envoy: for
Envoy) and the pods' selector labels; a topology spread constraint without a labelSelector spreads these
pods. */ -}}
{{- define "lbplane.podScheduling" -}}
{{- $v := .values -}}
{{- with $v.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
  - {{ toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" $.selector))) | indent 4 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* The selector labels of lbplane's and Envoy's pods. */ -}}
{{- define "lbplane.selector" -}}
{{- toJson (dict "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/component" "control-plane") -}}
{{- end -}}
{{- define "lbplane.envoySelector" -}}
{{- toJson (dict "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/component" "envoy") -}}
{{- end -}}

{{- /* The Secret of the push API tokens. */ -}}
{{- define "lbplane.tokenSecret" -}}
{{ include "lbplane.fullname" . }}-api-token
{{- end -}}

{{/* The bootstrap overlay for envoy.zone (see envoy-bootstrap/bootstrap.yaml.tmpl, lbctl bootstrap --zone). */}}
{{- define "lbplane.envoyZone" -}}
{{- $local := dict "socket_address" (dict "address" "127.0.0.1" "port_value" 9) -}}
{{- $cluster := dict "name" "lbplane_local" "type" "STATIC" "connect_timeout" "1s" "load_assignment" (dict "cluster_name" "lbplane_local" "endpoints" (list (dict "locality" (dict "zone" .) "lb_endpoints" (list (dict "endpoint" (dict "address" $local))))))  -}}
{{- dict "node" (dict "locality" (dict "zone" .)) "cluster_manager" (dict "local_cluster_name" "lbplane_local") "static_resources" (dict "clusters" (list $cluster)) | toJson -}}
{{- end }}

{{- /* lbplane serve --tenancy-file's content (tenancy: in values), or nothing when it delegates nothing. */ -}}
{{- define "lbplane.tenancy" -}}
{{- with .Values.tenancy }}
{{- if or .delegations (eq .undelegated "Deny") }}
{{- dict "undelegated" .undelegated "delegations" .delegations | toYaml }}
{{- end }}
{{- end }}
{{- end }}
