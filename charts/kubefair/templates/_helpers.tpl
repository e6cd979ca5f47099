{{/* Common names and labels. */}}
{{- define "kubefair.labels" -}}
app.kubernetes.io/name: kubefair
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "kubefair.controllerSelector" -}}
app.kubernetes.io/name: kubefair
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "kubefair.agentSelector" -}}
app.kubernetes.io/name: kubefair
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "kubefair.image" -}}
{{ .image.repository }}:{{ .image.tag | default .appVersion }}
{{- end }}

{{/* Env pointing the pods at the API server when there is no kube-proxy. */}}
{{- define "kubefair.apiServerEnv" -}}
{{- if .Values.apiServerOverride.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServerOverride.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.apiServerOverride.port | quote }}
{{- end }}
{{- end }}
