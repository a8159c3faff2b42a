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
