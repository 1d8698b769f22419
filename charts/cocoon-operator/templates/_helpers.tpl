{{/*
Names are fixed, not derived from the release: the CRDs, the ClusterRoles and the leader Lease
(cocoon-operator.cocoonset.cocoonstack.io, named by the operator's code) are cluster-wide or
fixed, so one release per cluster, and a kustomize install (config/default) is adopted object by
object under the same names.
*/}}

{{/* The labels every object carries: the kustomize tree's, and Helm's. */}}
{{- define "cocoon-operator.labels" -}}
app.kubernetes.io/name: cocoon-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
The Deployment's selector: the kustomize tree's, unchanged, since a selector cannot change on a
live Deployment (adopting a kustomize install would fail otherwise).
*/}}
{{- define "cocoon-operator.selectorLabels" -}}
app.kubernetes.io/name: cocoon-operator
{{- end -}}

{{/* The operator's image: a digest wins over a tag; the tag defaults to appVersion. */}}
{{- define "cocoon-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount subject the bindings grant to. */}}
{{- define "cocoon-operator.subject" -}}
- kind: ServiceAccount
  name: cocoon-operator
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* Whether the metrics Service is rendered: on its own switch, or for the ServiceMonitor. */}}
{{- define "cocoon-operator.metricsService" -}}
{{- if or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}

{{/* The metrics Service's name inside the cluster, as the certificate and scrapers name it. */}}
{{- define "cocoon-operator.metricsHost" -}}
cocoon-operator-metrics.{{ .Release.Namespace }}.svc
{{- end -}}
