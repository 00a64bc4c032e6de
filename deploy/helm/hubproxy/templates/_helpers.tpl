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

{{/* The S3 API's port: the part of config.s3-listen after the last colon; "" when it is off. */}}
{{- define "hubproxy.s3Port" -}}
{{- $listen := toString (index .Values.config "s3-listen" | default "") }}
{{- if $listen }}
{{- $port := regexFind "[0-9]+$" $listen }}
{{- if not $port }}
{{- fail (printf "config.s3-listen %q must end in :<port>" $listen) }}
{{- end }}
{{- $port }}
{{- end }}
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

{{/* The path of a dir: upstream (air-gapped mode), or "". */}}
{{- define "hubproxy.upstreamDir" -}}
{{- $up := toString (index .Values.config "upstream") }}
{{- if hasPrefix "dir:" $up }}{{ trimPrefix "dir:" $up }}{{ end }}
{{- end }}

{{/* The directory of a file:/// shared store, or "". */}}
{{- define "hubproxy.sharedStoreDir" -}}
{{- $store := toString (index .Values.config "shared-store" | default "") }}
{{- if hasPrefix "file://" $store }}{{ trimSuffix "/" (trimPrefix "file://" $store) | default "/" }}{{ end }}
{{- end }}

{{/* Where s3Credentials is mounted; HUBPROXY_S3_CREDENTIALS_FILE names the file in it. */}}
{{- define "hubproxy.s3CredentialsDir" -}}/etc/hubproxy-s3-credentials{{- end }}

{{/* Where sharedStore.secret is mounted; HUBPROXY_SHARED_STORE_SECRET_FILE names the file in it. */}}
{{- define "hubproxy.storeSecretDir" -}}/etc/hubproxy-store-secret{{- end }}

{{/* Where the CA bundle is mounted; SSL_CERT_FILE names the file in it. */}}
{{- define "hubproxy.caBundleDir" -}}/etc/hubproxy-ca{{- end }}

{{/* Labels that select the pods of the current mode. */}}
{{- define "hubproxy.podSelectorLabels" -}}
{{ include "hubproxy.selectorLabels" . }}
app.kubernetes.io/component: {{ eq .Values.mode "sidecar" | ternary "workload" "cache" }}
{{- end }}

{{/* Replicas of the pods of the current mode. */}}
{{- define "hubproxy.replicas" -}}
{{- if eq .Values.mode "sidecar" }}{{ int .Values.sidecar.workload.replicas }}{{ else }}{{ int .Values.replicaCount }}{{ end }}
{{- end }}

{{/*
"true" when hubproxy runs as a native sidecar (an initContainer with
restartPolicy: Always). Those need Kubernetes 1.29+: on an older API server the
field is dropped and hubproxy would block the pod as a never-ending init
container. "auto" falls back to an ordinary container there; true refuses.
*/}}
{{- define "hubproxy.nativeSidecar" -}}
{{- $native := .Values.sidecar.native }}
{{- $kube := .Capabilities.KubeVersion.Version }}
{{- $supported := semverCompare ">=1.29.0-0" $kube }}
{{- if eq (toString $native) "auto" }}
{{- if $supported }}true{{ end }}
{{- else if $native }}
{{- if not $supported }}
{{- fail (printf "sidecar.native=true needs Kubernetes 1.29 or later (native sidecar containers); this cluster is %s. Use sidecar.native=auto or false (an ordinary container, no start ordering), or pass the cluster's version to `helm template --kube-version`." $kube) }}
{{- end }}true
{{- end }}
{{- end }}

{{/*
Checks across values that the schema cannot express, made once per rendering
(configmap.yaml, which every mode renders, includes this). Each failure says
what to change.
*/}}
{{- define "hubproxy.validate" -}}
{{- $v := .Values }}
{{- if and $v.caBundle.configMap $v.caBundle.secret }}
{{- fail "caBundle: set configMap or secret, not both" }}
{{- end }}
{{- $dir := include "hubproxy.upstreamDir" . }}
{{- if $dir }}
{{- $covered := not (empty $v.upstreamDir.volume) }}
{{- range $v.extraVolumeMounts }}
{{- $m := trimSuffix "/" .mountPath }}
{{- if or (eq $m $dir) (hasPrefix (printf "%s/" $m) $dir) }}{{ $covered = true }}{{ end }}
{{- end }}
{{- if not $covered }}
{{- fail (printf "config.upstream %q: no volume provides %s (the image has no models); set upstreamDir.volume, e.g. {persistentVolumeClaim: {claimName: models, readOnly: true}}, or mount one there with extraVolumes/extraVolumeMounts" (index $v.config "upstream") $dir) }}
{{- end }}
{{- else if $v.upstreamDir.volume }}
{{- fail (printf "upstreamDir.volume is set but config.upstream is %q; air-gapped mode needs config.upstream: dir:<path>" (index $v.config "upstream")) }}
{{- end }}
{{- $storeDir := include "hubproxy.sharedStoreDir" . }}
{{- if $storeDir }}
{{- $covered := not (empty $v.sharedStore.volume) }}
{{- range $v.extraVolumeMounts }}
{{- $m := trimSuffix "/" .mountPath }}
{{- if or (eq $m $storeDir) (hasPrefix (printf "%s/" $m) $storeDir) }}{{ $covered = true }}{{ end }}
{{- end }}
{{- if not $covered }}
{{- fail (printf "config.shared-store %q: no volume provides %s; set sharedStore.volume to a ReadWriteMany volume, e.g. {persistentVolumeClaim: {claimName: hubproxy-shared}}, or mount one there with extraVolumes/extraVolumeMounts" (index $v.config "shared-store") $storeDir) }}
{{- end }}
{{- else if $v.sharedStore.volume }}
{{- fail (printf "sharedStore.volume is set but config.shared-store is %q; a volume store needs config.shared-store: file:///<dir>" (index $v.config "shared-store" | default "")) }}
{{- end }}
{{- if and $v.sharedStore.credentials.existingSecret (not (hasPrefix "s3://" (toString (index $v.config "shared-store" | default "")))) }}
{{- fail "sharedStore.credentials.existingSecret is set but config.shared-store is not an s3:// URL" }}
{{- end }}
{{- if and $v.s3Credentials.existingSecret (index $v.config "s3-credentials-file") }}
{{- fail "s3Credentials.existingSecret and config.s3-credentials-file are both set; the chart mounts the Secret and names its file itself: set one" }}
{{- end }}
{{- $sealSecret := $v.sharedStore.secret.existingSecret }}
{{- $sealFile := toString (index $v.config "shared-store-secret-file" | default "") }}
{{- if index $v.config "shared-store" }}
{{- if and (not $sealSecret) (not $sealFile) }}
{{- fail "config.shared-store needs the cluster's secret, which seals the chunks pods put in the store (without it anyone who can write the store could make every pod serve bytes of their choosing). Create it once, the same for every release sharing the store: kubectl create secret generic hubproxy-store-secret --from-literal=secret=\"$(head -c 32 /dev/urandom | base64)\", then set sharedStore.secret.existingSecret=hubproxy-store-secret" }}
{{- end }}
{{- if and $sealSecret $sealFile }}
{{- fail "sharedStore.secret.existingSecret and config.shared-store-secret-file are both set; the chart mounts the Secret and names its file itself: set one" }}
{{- end }}
{{- if and $sealSecret (eq $sealSecret $v.sharedStore.credentials.existingSecret) }}
{{- fail "sharedStore.secret.existingSecret names the Secret of the store's credentials: keep the sealing secret in a Secret of its own, since whoever holds the store's keys must not be able to seal chunks" }}
{{- end }}
{{- else if or $sealSecret $sealFile }}
{{- fail "sharedStore.secret.existingSecret or config.shared-store-secret-file is set but config.shared-store is not: the secret seals the shared store's chunks" }}
{{- end }}
{{- if and $v.serviceMonitor.enabled (eq $v.mode "sidecar") }}
{{- fail "serviceMonitor: sidecar pods have no Service; use podMonitor.enabled=true" }}
{{- end }}
{{- if and $v.serviceMonitor.enabled $v.podMonitor.enabled }}
{{- fail "serviceMonitor and podMonitor both scrape the same pods; enable one" }}
{{- end }}
{{- if $v.ingress.enabled }}
{{- if eq $v.mode "sidecar" }}
{{- fail "ingress: sidecar pods have no Service to route to (hubproxy serves your own containers on 127.0.0.1); use it in standalone mode" }}
{{- end }}
{{- if not $v.ingress.hosts }}
{{- fail "ingress.enabled needs at least one entry in ingress.hosts, e.g. [{host: hubproxy.example.com}]" }}
{{- end }}
{{- end }}
{{- if and $v.service.nodePort (eq $v.service.type "ClusterIP") }}
{{- fail "service.nodePort is set but service.type is ClusterIP; set service.type=NodePort (or LoadBalancer)" }}
{{- end }}
{{- if and (or $v.service.loadBalancerIP $v.service.loadBalancerSourceRanges) (ne $v.service.type "LoadBalancer") }}
{{- fail "service.loadBalancerIP and service.loadBalancerSourceRanges apply only to service.type=LoadBalancer" }}
{{- end }}
{{- end }}

{{/*
The hubproxy container, shared by both modes. Call with a dict:
  root: the top context; image: the image; extraEnv: extra EnvVars (list);
  native: "true" to add restartPolicy: Always (native sidecar).
The image's ENTRYPOINT is ["/hubproxy"] and its CMD ["serve"]; args replace
CMD, so they start with the subcommand.
*/}}
{{- define "hubproxy.container" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $socketDir := include "hubproxy.adminSocketDir" $root -}}
{{- $upstreamDir := include "hubproxy.upstreamDir" $root -}}
{{- $caSource := or $v.caBundle.configMap $v.caBundle.secret -}}
{{- $storeDir := include "hubproxy.sharedStoreDir" $root -}}
{{- $storeCreds := $v.sharedStore.credentials -}}
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
    {{- with include "hubproxy.s3Port" $root }}
    - name: s3
      containerPort: {{ . }}
      protocol: TCP
    {{- end }}
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
    {{- if $storeCreds.existingSecret }}
    - name: AWS_ACCESS_KEY_ID
      valueFrom:
        secretKeyRef:
          name: {{ $storeCreds.existingSecret }}
          key: {{ $storeCreds.accessKeyIdKey }}
    - name: AWS_SECRET_ACCESS_KEY
      valueFrom:
        secretKeyRef:
          name: {{ $storeCreds.existingSecret }}
          key: {{ $storeCreds.secretAccessKeyKey }}
    {{- end }}
    {{- if $v.sharedStore.secret.existingSecret }}
    {{- /* The environment wins over the config file, whose key is empty then. */}}
    - name: HUBPROXY_SHARED_STORE_SECRET_FILE
      value: {{ include "hubproxy.storeSecretDir" $root }}/secret
    {{- end }}
    {{- if $v.s3Credentials.existingSecret }}
    - name: HUBPROXY_S3_CREDENTIALS_FILE
      value: {{ include "hubproxy.s3CredentialsDir" $root }}/credentials
    {{- end }}
    {{- if $caSource }}
    - name: SSL_CERT_FILE
      value: {{ include "hubproxy.caBundleDir" $root }}/ca.crt
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
    {{- if $caSource }}
    - name: ca-bundle
      mountPath: {{ include "hubproxy.caBundleDir" $root }}
      readOnly: true
    {{- end }}
    {{- if and $upstreamDir $v.upstreamDir.volume }}
    - name: upstream-dir
      mountPath: {{ $upstreamDir }}
      readOnly: true
    {{- end }}
    {{- if and $storeDir $v.sharedStore.volume }}
    - name: shared-store
      mountPath: {{ $storeDir }}
    {{- end }}
    {{- if $v.sharedStore.secret.existingSecret }}
    - name: shared-store-secret
      mountPath: {{ include "hubproxy.storeSecretDir" $root }}
      readOnly: true
    {{- end }}
    {{- if $v.s3Credentials.existingSecret }}
    - name: s3-credentials
      mountPath: {{ include "hubproxy.s3CredentialsDir" $root }}
      readOnly: true
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* Volumes every hubproxy pod has besides the cache. */}}
{{- define "hubproxy.commonVolumes" -}}
{{- $v := .Values -}}
- name: config
  configMap:
    name: {{ include "hubproxy.fullname" . }}
- name: tmp
  emptyDir: {{ with $v.tmpSizeLimit }}{ sizeLimit: {{ . }} }{{ else }}{}{{ end }}
{{- if include "hubproxy.adminSocketDir" . }}
- name: admin-socket
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- if $v.caBundle.configMap }}
- name: ca-bundle
  configMap:
    name: {{ $v.caBundle.configMap }}
    items:
      - key: {{ $v.caBundle.key }}
        path: ca.crt
{{- else if $v.caBundle.secret }}
- name: ca-bundle
  secret:
    secretName: {{ $v.caBundle.secret }}
    items:
      - key: {{ $v.caBundle.key }}
        path: ca.crt
{{- end }}
{{- if and (include "hubproxy.upstreamDir" .) $v.upstreamDir.volume }}
- name: upstream-dir
  {{- toYaml $v.upstreamDir.volume | nindent 2 }}
{{- end }}
{{- if and (include "hubproxy.sharedStoreDir" .) $v.sharedStore.volume }}
- name: shared-store
  {{- toYaml $v.sharedStore.volume | nindent 2 }}
{{- end }}
{{- if $v.sharedStore.secret.existingSecret }}
{{- /* Only the hubproxy container mounts it; 0440: root and the pod's fsGroup. */}}
- name: shared-store-secret
  secret:
    secretName: {{ $v.sharedStore.secret.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $v.sharedStore.secret.key }}
        path: secret
{{- end }}
{{- if $v.s3Credentials.existingSecret }}
{{- /* 0400: hubproxy refuses a credentials file others may read; fsGroup adds group read. */}}
- name: s3-credentials
  secret:
    secretName: {{ $v.s3Credentials.existingSecret }}
    defaultMode: 0400
    items:
      - key: {{ $v.s3Credentials.key }}
        path: credentials
{{- end }}
{{- with $v.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Scheduling fields shared by both modes' pods. Call with the top context. */}}
{{- define "hubproxy.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
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
