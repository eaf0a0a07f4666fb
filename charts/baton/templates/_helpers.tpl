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

{{/*
The webhook replicas' ServiceAccount: theirs alone, with only what serving the webhook needs.
*/}}
{{- define "baton.webhookServiceAccountName" -}}
{{ include "baton.fullname" . }}-webhook
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
{{- range $list := list "allow" "deny" }}
{{- range (get $.Values.egress $list) }}
{{- if or (not (kindIs "string" .)) (regexMatch "[,\\s]" .) (eq . "") }}
{{- fail (printf "egress.%s: %q is not one address: give each CIDR, IP address or host name as its own list item" $list (toString .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.secretNamespaces }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (toString .)) }}
{{- fail (printf "secretNamespaces: %q is not a namespace name" (toString .)) }}
{{- end }}
{{- end }}
{{- with .Values.webhook.clientCA }}
{{- if and .secretName .configMapName }}
{{- fail "webhook.clientCA: set secretName or configMapName, not both" }}
{{- end }}
{{- if and (or .secretName .configMapName) (not .key) }}
{{- fail "webhook.clientCA.key is empty: set it to the CA bundle's key in the Secret or ConfigMap" }}
{{- end }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.apiServer.ports) }}
{{- fail "networkPolicy.apiServer.ports is empty: the operator could not reach the API server" }}
{{- end }}
{{- end }}

{{/*
The webhook's client CA bundle, as a file name in the certificate directory
(--webhook-client-ca-name), when webhook.clientCA names a Secret or a ConfigMap. The serving
certificate's Secret has a ca.crt of its own, so the bundle gets another name.
*/}}
{{- define "baton.webhookClientCAFile" -}}
{{- if or .Values.webhook.clientCA.secretName .Values.webhook.clientCA.configMapName }}client-ca.crt{{ end }}
{{- end }}

{{/*
The webhook's certificate directory, for both Deployments: the serving certificate's Secret,
and with webhook.clientCA the CA bundle beside it.
*/}}
{{- define "baton.certVolume" -}}
- name: cert
{{- $ca := .Values.webhook.clientCA }}
{{- if include "baton.webhookClientCAFile" . }}
  projected:
    sources:
    - secret:
        name: {{ include "baton.webhookCertSecretName" . }}
    {{- if $ca.secretName }}
    - secret:
        name: {{ $ca.secretName | quote }}
        items:
        - key: {{ $ca.key | quote }}
          path: {{ include "baton.webhookClientCAFile" . }}
    {{- else }}
    - configMap:
        name: {{ $ca.configMapName | quote }}
        items:
        - key: {{ $ca.key | quote }}
          path: {{ include "baton.webhookClientCAFile" . }}
    {{- end }}
{{- else }}
  secret:
    secretName: {{ include "baton.webhookCertSecretName" . }}
{{- end }}
{{- end }}

{{/*
The manager's ClusterRole rules, controller-gen's (config/rbac/role.yaml, copied to files/ by
hack/chart-sync.sh), so that they follow the code; as YAML {cluster: [...], secrets: [...]}.
With secretNamespaces set, the rules for Secrets move from cluster to secrets, for a Role in
each of those namespaces.
*/}}
{{- define "baton.managerRules" -}}
{{- $role := .Files.Get "files/manager-role.yaml" | fromYaml }}
{{- if not $role.rules }}
{{- fail "files/manager-role.yaml has no rules: run hack/chart-sync.sh" }}
{{- end }}
{{- $cluster := list }}
{{- $secrets := list }}
{{- range $rule := $role.rules }}
{{- if and $.Values.secretNamespaces (has "" $rule.apiGroups) (has "secrets" $rule.resources) }}
{{- if ne (len $rule.apiGroups) 1 }}
{{- fail "files/manager-role.yaml has a rule for Secrets that names more API groups than the core one: the chart cannot move it into per-namespace Roles" }}
{{- end }}
{{- $secrets = append $secrets (merge (dict "resources" (list "secrets")) $rule) }}
{{- with without $rule.resources "secrets" }}
{{- $cluster = append $cluster (merge (dict "resources" .) $rule) }}
{{- end }}
{{- else }}
{{- $cluster = append $cluster $rule }}
{{- end }}
{{- end }}
{{- if and .Values.secretNamespaces (not $secrets) }}
{{- fail "secretNamespaces is set, but files/manager-role.yaml has no rule for Secrets to move into its Roles" }}
{{- end }}
{{- toYaml (dict "cluster" $cluster "secrets" $secrets) }}
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
