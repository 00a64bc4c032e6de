package chartcheck

import (
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	hubproxyContainer = "hubproxy"
	nonrootUID        = 65532
	gpuResource       = corev1.ResourceName("nvidia.com/gpu")
	socketVolume      = "admin-socket"
)

// listenPort is the port at the end of config listen (":8080" → 8080).
func listenPort(t *testing.T, cfg map[string]any) int32 {
	t.Helper()
	listen, _ := cfg["listen"].(string)
	n, err := strconv.ParseInt(listen[strings.LastIndex(listen, ":")+1:], 10, 32)
	if err != nil || !strings.Contains(listen, ":") {
		t.Fatalf("config listen %q has no port", listen)
	}
	return int32(n)
}

// socketDir is the directory of a unix:// admin-listen, or "" for none.
func socketDir(cfg map[string]any) string {
	admin, _ := cfg["admin-listen"].(string)
	if p, ok := strings.CutPrefix(admin, "unix://"); ok {
		return path.Dir(p)
	}
	return ""
}

// findContainer looks in containers and initContainers.
func findContainer(spec *corev1.PodSpec, name string) (c *corev1.Container, init bool) {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i], true
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], false
		}
	}
	return nil, false
}

func findEnv(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func findVolume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// mountAt returns the volume mounted at dir, or "".
func mountAt(c *corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			return m.Name
		}
	}
	return ""
}

// subset reports whether every label of sel is in labels with the same value.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkHubproxyPod checks the hubproxy container and its pod, in both modes:
// non-root, read-only root, no capabilities, probes, mounts, env, token and CA
// sources. How the container starts is checked by running it (TestChartBoots).
func checkHubproxyPod(t *testing.T, objs []object, w workload, cfg map[string]any, exp expectation) {
	t.Helper()
	spec := w.spec()
	c, _ := findContainer(spec, hubproxyContainer)
	if c == nil {
		t.Fatalf("%s %s has no %s container", w.kind, w.name, hubproxyContainer)
	}
	if w.selector == nil || !subset(w.selector.MatchLabels, w.podLabels()) {
		t.Errorf("selector %v does not match pod labels %v", w.selector, w.podLabels())
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(w.template.Annotations["checksum/config"]) {
		t.Errorf("pod annotation checksum/config = %q, want a sha256", w.template.Annotations["checksum/config"])
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("pod mounts a service account token; hubproxy never calls the API server")
	}
	if sas := ofType[corev1.ServiceAccount](objs); len(sas) != 1 || spec.ServiceAccountName != sas[0].Name {
		t.Errorf("serviceAccountName %q does not name the rendered ServiceAccount", spec.ServiceAccountName)
	}

	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("hubproxy has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("hubproxy: runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser != nonrootUID:
		t.Errorf("hubproxy: runAsUser = %v, want %d", sc.RunAsUser, nonrootUID)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("hubproxy: readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("hubproxy: allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("hubproxy: privileged")
	case sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("hubproxy: capabilities = %+v, want drop [ALL] and no add", sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("hubproxy: seccompProfile = %+v, want RuntimeDefault", seccomp)
	}

	// The hub API's port, and the S3 API's when s3-listen is set.
	port := listenPort(t, cfg)
	want := []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	if s3, _ := cfg["s3-listen"].(string); s3 != "" {
		n, err := strconv.ParseInt(s3[strings.LastIndex(s3, ":")+1:], 10, 32)
		if err != nil {
			t.Fatalf("config s3-listen %q has no port", s3)
		}
		want = append(want, corev1.ContainerPort{Name: "s3", ContainerPort: int32(n), Protocol: corev1.ProtocolTCP})
	}
	if !reflect.DeepEqual(c.Ports, want) {
		t.Errorf("hubproxy ports = %+v, want %+v", c.Ports, want)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("hubproxy has no %s httpGet probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe = %s on %s, want %s on http", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("hubproxy has no memory limit")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= configDuration(t, cfg, "shutdown-timeout") {
		t.Errorf("terminationGracePeriodSeconds %v is not above shutdown-timeout %v: the kubelet would kill transfers hubproxy is draining", g, cfg["shutdown-timeout"])
	}

	if v := findVolume(spec, mountAt(c, "/etc/hubproxy")); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != configMapOf(t, objs).Name {
		t.Errorf("/etc/hubproxy is not the rendered ConfigMap: %+v", v)
	}
	if v := findVolume(spec, mountAt(c, "/tmp")); v == nil || v.EmptyDir == nil {
		t.Errorf("/tmp is not an emptyDir: %+v", v)
	}
	cacheDir, _ := cfg["cache-dir"].(string)
	if mountAt(c, cacheDir) != "cache" || findVolume(spec, "cache") == nil {
		t.Errorf("cache volume is not mounted at cache-dir %q", cacheDir)
	}
	if e := findEnv(c, "HUBPROXY_CACHE_DIR"); e == nil || e.Value != cacheDir {
		t.Errorf("HUBPROXY_CACHE_DIR = %+v, want %q (the image's variable would beat the config file)", e, cacheDir)
	}
	if dir := socketDir(cfg); dir != "" {
		if v := findVolume(spec, socketVolume); v == nil || v.EmptyDir == nil || mountAt(c, dir) != socketVolume {
			t.Errorf("admin socket dir %s is not an emptyDir mounted in hubproxy", dir)
		}
	} else if findVolume(spec, socketVolume) != nil {
		t.Error("admin-socket volume rendered without a unix:// admin-listen")
	}
	checkCABundle(t, spec, c, exp)
	if up, _ := cfg["upstream"].(string); strings.HasPrefix(up, "dir:") != exp.upstreamDir {
		t.Errorf("upstream %q, want a dir: upstream %v", up, exp.upstreamDir)
	} else if dir, ok := strings.CutPrefix(up, "dir:"); ok {
		v := findVolume(spec, mountAt(c, dir))
		if v == nil || v.PersistentVolumeClaim == nil && v.NFS == nil && v.HostPath == nil && v.CSI == nil {
			t.Errorf("upstream %s: nothing but the image's empty root is at %s (volume %+v)", up, dir, v)
		}
	}
	checkTokenEnv(t, objs, c, exp)
}

// checkCABundle wants SSL_CERT_FILE to name a file the bundle's volume puts
// in place, and nothing of the kind without a bundle.
func checkCABundle(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, exp expectation) {
	t.Helper()
	e := findEnv(c, "SSL_CERT_FILE")
	if exp.caBundle == "" {
		if e != nil {
			t.Errorf("SSL_CERT_FILE = %q without a CA bundle: it would hide the image's roots", e.Value)
		}
		return
	}
	if e == nil {
		t.Fatal("CA bundle set, but no SSL_CERT_FILE points at it")
	}
	dir, file := path.Split(e.Value)
	v := findVolume(spec, mountAt(c, path.Clean(dir)))
	if v == nil {
		t.Fatalf("SSL_CERT_FILE=%s: no volume is mounted at %s", e.Value, dir)
	}
	var name string
	var items []corev1.KeyToPath
	switch {
	case v.ConfigMap != nil:
		name, items = v.ConfigMap.Name, v.ConfigMap.Items
	case v.Secret != nil:
		name, items = v.Secret.SecretName, v.Secret.Items
	}
	if name != exp.caBundle || !slices.ContainsFunc(items, func(i corev1.KeyToPath) bool { return i.Path == file }) {
		t.Errorf("SSL_CERT_FILE=%s is not a key of %s in volume %+v", e.Value, exp.caBundle, v.VolumeSource)
	}
}

// configDuration reads a duration key of the rendered config.
func configDuration(t *testing.T, cfg map[string]any, key string) time.Duration {
	t.Helper()
	s, _ := cfg[key].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("config %s = %v: %v", key, cfg[key], err)
	}
	return d
}

// checkTokenEnv wants HUBPROXY_UPSTREAM_TOKEN only from a Secret, and only
// when the scenario sets a token.
func checkTokenEnv(t *testing.T, objs []object, c *corev1.Container, exp expectation) {
	t.Helper()
	e := findEnv(c, "HUBPROXY_UPSTREAM_TOKEN")
	if exp.tokenRef == nil {
		if e != nil {
			t.Errorf("HUBPROXY_UPSTREAM_TOKEN set without a token: %+v", e)
		}
		return
	}
	if e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("HUBPROXY_UPSTREAM_TOKEN = %+v, want a secretKeyRef", e)
	}
	if ref := e.ValueFrom.SecretKeyRef; ref.Name != exp.tokenRef.Name || ref.Key != exp.tokenRef.Key {
		t.Errorf("token from secret %s key %s, want %s key %s", ref.Name, ref.Key, exp.tokenRef.Name, exp.tokenRef.Key)
	}
	for _, s := range ofType[corev1.Secret](objs) {
		if s.Name == exp.tokenRef.Name && len(s.Data[exp.tokenRef.Key]) == 0 {
			t.Errorf("Secret %s has no key %s", s.Name, exp.tokenRef.Key)
		}
	}
}
