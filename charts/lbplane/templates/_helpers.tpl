{{- define "lbplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "lbplane.labels" -}}
app.kubernetes.io/name: lbplane
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
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

{{- /* Envoy's heap budget for its overload actions (max_heap_size_bytes): 80 % of the container's memory
limit, so that Envoy sheds load (shrink heap, no keep-alive at 95 %, refuse requests at 98 %) before the
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

{{- /* The Secret lbplane keeps its CA in, and the one it keeps the Envoys' group certificate in. */ -}}
{{- define "lbplane.caSecret" -}}
{{ include "lbplane.fullname" . }}-ca
{{- end -}}
{{- define "lbplane.envoySecret" -}}
{{ include "lbplane.fullname" . }}-envoy-tls
{{- end -}}

{{- /* cert-manager issues the certificates (mtls.certManager.issuerRef.name set) instead of lbplane's CA. */ -}}
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
