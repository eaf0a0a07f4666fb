{{/*
The chart's name, for the app.kubernetes.io/name label: config/default's selectors use it, so
it stays "baton" unless nameOverride says otherwise.
*/}}
{{- define "baton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name. Release "baton" gives "baton", so the names are
config/default's (namePrefix baton-).
*/}}
{{- define "baton.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels of every object. Selectors use only baton.selectorLabels, which are config/default's:
a selector cannot change after install.
*/}}
{{- define "baton.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "baton.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
What the PodDisruptionBudget and the webhook Service select: the controllers and the webhook
replicas, which all serve the webhook.
*/}}
{{- define "baton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "baton.name" . }}
control-plane: controller-manager
{{- end }}

{{- define "baton.serviceAccountName" -}}
{{ include "baton.fullname" . }}-controller-manager
{{- end }}

{{- define "baton.webhookServiceName" -}}
{{ include "baton.fullname" . }}-webhook-service
{{- end }}

{{/*
The webhook's certificate Secret has config/default's name (kustomize leaves it unprefixed). It
is not per release; neither is the leader election lease (agents.baton.dev), so there is one
Baton per namespace.
*/}}
{{- define "baton.webhookCertSecretName" -}}
webhook-server-cert
{{- end }}

{{- define "baton.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
Stops the render on values that would install something that cannot work, with what to change.
Every template that depends on these values includes it.
*/}}
{{- define "baton.validate" -}}
{{- $store := .Values.transcript.store }}
{{- if not (has $store (list "sqlite" "postgres")) }}
{{- fail (printf "transcript.store must be sqlite or postgres, not %q" (toString $store)) }}
{{- end }}
{{- if and (eq $store "sqlite") (ne (int .Values.controller.replicas) 1) }}
{{- fail (printf "controller.replicas is %v, but transcript.store sqlite keeps the transcript in one SQLite file that only one controller replica may open: set controller.replicas to 1, or set transcript.store to postgres" .Values.controller.replicas) }}
{{- end }}
{{- if eq $store "postgres" }}
{{- $dsn := .Values.transcript.postgres.dsn }}
{{- if not $dsn }}
{{- fail "transcript.store is postgres: set transcript.postgres.dsn (without the password) and transcript.postgres.passwordSecret.name" }}
{{- end }}
{{- if not .Values.transcript.postgres.passwordSecret.name }}
{{- fail "transcript.store is postgres: set transcript.postgres.passwordSecret.name to the Secret that holds the password (PGPASSWORD)" }}
{{- end }}
{{- if or (regexMatch "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@]*:[^/?#@]*@" $dsn) (regexMatch "(?i)(^|[\\s?&])password=" $dsn) }}
{{- fail "transcript.postgres.dsn has a password in it, and it would be readable in the Deployment's args: take it out and put it in the Secret transcript.postgres.passwordSecret names" }}
{{- end }}
{{- end }}
{{- if not (has .Values.webhook.certificate.source (list "cert-manager" "self-signed")) }}
{{- fail (printf "webhook.certificate.source must be cert-manager or self-signed, not %q" (toString .Values.webhook.certificate.source)) }}
{{- end }}
{{- end }}

{{/*
Where both Deployments' pods may run and how they pull the image: the same values for both.
*/}}
{{- define "baton.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The manager container's parts both Deployments share, as config/manager has them.
*/}}
{{- define "baton.containerCommon" -}}
image: {{ include "baton.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
command: [/manager]
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
livenessProbe:
  httpGet:
    path: /healthz
    port: 8081
  initialDelaySeconds: 15
  periodSeconds: 20
readinessProbe:
  httpGet:
    path: /readyz
    port: 8081
  initialDelaySeconds: 5
  periodSeconds: 10
{{- end }}
