{{/* Names, labels and the values-derived facts every template shares. */}}

{{- define "hubproxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hubproxy.fullname" -}}
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

{{- define "hubproxy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (never add version here). */}}
{{- define "hubproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hubproxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hubproxy.labels" -}}
helm.sh/chart: {{ include "hubproxy.chart" . }}
{{ include "hubproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hubproxy
{{- end }}

{{- define "hubproxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hubproxy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The API port: the part of config.listen after the last colon. */}}
{{- define "hubproxy.port" -}}
{{- $listen := toString (index .Values.config "listen") }}
{{- $port := regexFind "[0-9]+$" $listen }}
{{- if not $port }}
{{- fail (printf "config.listen %q must end in :<port>" $listen) }}
{{- end }}
{{- $port }}
{{- end }}

{{/*
The directory of the admin Unix socket, or "" when admin-listen is a loopback
address or empty. Anything reachable on the pod IP is refused: the admin API
spends GPU memory and deletes cache data.
*/}}
{{- define "hubproxy.adminSocketDir" -}}
{{- $admin := toString (index .Values.config "admin-listen" | default "") }}
{{- if hasPrefix "unix://" $admin }}
{{- dir (trimPrefix "unix://" $admin) }}
{{- else if or (eq $admin "") (hasPrefix "127.0.0.1:" $admin) (hasPrefix "[::1]:" $admin) (hasPrefix "localhost:" $admin) }}
{{- else }}
{{- fail (printf "config.admin-listen %q would be reachable on the pod IP; use unix:///run/hubproxy/admin.sock or a 127.0.0.1 address" $admin) }}
{{- end }}
{{- end }}

{{- define "hubproxy.tokenSecretName" -}}
{{- default (printf "%s-upstream-token" (include "hubproxy.fullname" .)) .Values.upstreamToken.existingSecret }}
{{- end }}

{{- define "hubproxy.hasToken" -}}
{{- if or .Values.upstreamToken.value .Values.upstreamToken.existingSecret }}true{{ end }}
{{- end }}

{{- define "hubproxy.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{- define "hubproxy.cudaImage" -}}
{{- printf "%s:%s%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) .Values.image.cudaTagSuffix }}
{{- end }}

{{/*
The hubproxy container, shared by both modes. Call with a dict:
  root: the top context; image: the image; extraEnv: extra EnvVars (list);
  native: true to add restartPolicy: Always (native sidecar).
*/}}
{{- define "hubproxy.container" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $socketDir := include "hubproxy.adminSocketDir" $root -}}
- name: hubproxy
  image: {{ .image | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if .native }}
  restartPolicy: Always
  {{- end }}
  args:
    - serve
    - --config=/etc/hubproxy/hubproxy.yaml
    {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: http
      containerPort: {{ include "hubproxy.port" $root }}
      protocol: TCP
  env:
    {{- /* The image sets HUBPROXY_CACHE_DIR, and the environment wins over the
    config file: pin it to the value the cache volume is mounted at. */}}
    - name: HUBPROXY_CACHE_DIR
      value: {{ index $v.config "cache-dir" | quote }}
    {{- if include "hubproxy.hasToken" $root }}
    - name: HUBPROXY_UPSTREAM_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ include "hubproxy.tokenSecretName" $root }}
          key: {{ $v.upstreamToken.existingSecretKey }}
    {{- end }}
    {{- with .extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  startupProbe:
    httpGet:
      path: {{ $v.probes.startup.path }}
      port: http
    periodSeconds: {{ $v.probes.startup.periodSeconds }}
    failureThreshold: {{ $v.probes.startup.failureThreshold }}
  livenessProbe:
    httpGet:
      path: {{ $v.probes.liveness.path }}
      port: http
    periodSeconds: {{ $v.probes.liveness.periodSeconds }}
    timeoutSeconds: {{ $v.probes.liveness.timeoutSeconds }}
    failureThreshold: {{ $v.probes.liveness.failureThreshold }}
  readinessProbe:
    httpGet:
      path: {{ $v.probes.readiness.path }}
      port: http
    periodSeconds: {{ $v.probes.readiness.periodSeconds }}
    timeoutSeconds: {{ $v.probes.readiness.timeoutSeconds }}
    failureThreshold: {{ $v.probes.readiness.failureThreshold }}
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/hubproxy
      readOnly: true
    - name: cache
      mountPath: {{ index $v.config "cache-dir" }}
    - name: tmp
      mountPath: /tmp
    {{- if $socketDir }}
    - name: admin-socket
      mountPath: {{ $socketDir }}
    {{- end }}
{{- end }}

{{/* Volumes every hubproxy pod has besides the cache. */}}
{{- define "hubproxy.commonVolumes" -}}
- name: config
  configMap:
    name: {{ include "hubproxy.fullname" . }}
- name: tmp
  emptyDir: {{ with .Values.tmpSizeLimit }}{ sizeLimit: {{ . }} }{{ else }}{}{{ end }}
{{- if include "hubproxy.adminSocketDir" . }}
- name: admin-socket
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- end }}

{{/* Pod annotations: restart pods when the config or the token changes. */}}
{{- define "hubproxy.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if .Values.upstreamToken.value }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
