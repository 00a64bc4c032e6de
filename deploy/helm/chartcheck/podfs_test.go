package chartcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hubproxy/hubproxy/deploy/image/ociimage"
)

// podRoot is one container's filesystem laid out under a host directory: the
// image's files, then each volume at its mountPath. A path the container sees
// is root+path here, so the process gets the same layout with nothing outside
// the test's directory touched (no /run/hubproxy on the host, no /models).
type podRoot struct{ dir string }

func (r podRoot) host(p string) string { return filepath.Join(r.dir, filepath.FromSlash(p)) }

// relocate rewrites the container paths in one value: "/abs", "unix:///abs",
// "dir:/abs", "file:///abs", "--flag=" followed by one of those, or a
// ':'-separated list of absolute paths (PATH). Anything else (URLs, names) is
// left alone.
func (r podRoot) relocate(s string) string {
	if k, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(k, "--") {
		return k + "=" + r.relocate(v)
	}
	for _, scheme := range []string{"unix://", "dir:", "file://"} {
		if rest, ok := strings.CutPrefix(s, scheme); ok && strings.HasPrefix(rest, "/") {
			return scheme + r.host(rest)
		}
	}
	if !strings.HasPrefix(s, "/") {
		return s
	}
	parts := strings.Split(s, ":")
	for i, p := range parts {
		if !strings.HasPrefix(p, "/") {
			return s
		}
		parts[i] = r.host(p)
	}
	return strings.Join(parts, ":")
}

// relocateConfigFile rewrites the container paths among a YAML config file's
// values (cache-dir, admin-listen, a dir: upstream), keeping every key.
func (r podRoot) relocateConfigFile(hostPath string) error {
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", hostPath, err)
	}
	for k, v := range cfg {
		switch v := v.(type) {
		case string:
			cfg[k] = r.relocate(v)
		case []any:
			for i, e := range v {
				if s, ok := e.(string); ok {
					v[i] = r.relocate(s)
				}
			}
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(hostPath, out, 0o644)
}

// extractImage writes the image's directories and files under the root.
func (r podRoot) extractImage(files map[string]ociimage.File) error {
	for p, f := range files {
		if f.Data == nil {
			if err := os.MkdirAll(r.host(p), 0o755); err != nil {
				return err
			}
		}
	}
	for p, f := range files {
		if f.Data != nil {
			if err := os.MkdirAll(filepath.Dir(r.host(p)), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(r.host(p), f.Data, os.FileMode(f.Header.Mode)&0o755|0o200); err != nil {
				return err
			}
		}
	}
	return nil
}

// testCluster holds what a pod may reference that the chart does not render:
// a user's Secrets and ConfigMaps, and the contents of existing claims.
type testCluster struct {
	secrets    map[string]map[string][]byte
	configMaps map[string]map[string]string
	claims     map[string]func(t *testing.T, dir string)
	// logged are strings hubproxy must log, given what the above hold.
	logged []string
}

// lookup finds a key of a Secret or ConfigMap, rendered or in the cluster.
func (tc testCluster) lookup(objs []object) secretSource {
	return func(kind, name, key string) (string, error) {
		data, err := tc.data(objs, kind, name)
		if err != nil {
			return "", err
		}
		v, ok := data[key]
		if !ok {
			return "", fmt.Errorf("%s %s has no key %q", kind, name, key)
		}
		return v, nil
	}
}

// data returns all keys of a Secret or ConfigMap, rendered or in the cluster.
func (tc testCluster) data(objs []object, kind, name string) (map[string]string, error) {
	out := map[string]string{}
	switch kind {
	case "Secret":
		for _, s := range ofType[corev1.Secret](objs) {
			if s.Name == name {
				for k, v := range s.Data {
					out[k] = string(v)
				}
				return out, nil
			}
		}
		if d, ok := tc.secrets[name]; ok {
			for k, v := range d {
				out[k] = string(v)
			}
			return out, nil
		}
	case "ConfigMap":
		for _, cm := range ofType[corev1.ConfigMap](objs) {
			if cm.Name == name {
				return cm.Data, nil
			}
		}
		if d, ok := tc.configMaps[name]; ok {
			return d, nil
		}
	}
	return nil, fmt.Errorf("the pod references %s %q, which neither the chart nor the test's cluster provides", kind, name)
}

// mountVolumes puts each of c's volumes at its mountPath under the root, as
// the kubelet would: ConfigMap and Secret keys as files, empty emptyDirs, a
// fresh claim empty and an existing one with its test contents.
func (r podRoot) mountVolumes(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, objs []object, tc testCluster) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		v := findVolume(spec, m.Name)
		if v == nil {
			t.Fatalf("mount %s: the pod has no volume %q", m.MountPath, m.Name)
		}
		if m.SubPath != "" {
			t.Fatalf("mount %s: subPath is not modelled by this test", m.MountPath)
		}
		dir := r.host(m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var kind, name string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			kind, name, items = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items
		case v.Secret != nil:
			kind, name, items = "Secret", v.Secret.SecretName, v.Secret.Items
		case v.EmptyDir != nil:
			continue
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			if fill, ok := tc.claims[claim]; ok {
				fill(t, dir)
				continue
			}
			if !rendersClaim(objs, claim) {
				t.Fatalf("volume %s: claim %q is neither rendered nor in the test's cluster", m.Name, claim)
			}
			continue
		default:
			t.Fatalf("volume %s: %+v is not modelled by this test", m.Name, v.VolumeSource)
		}
		data, err := tc.data(objs, kind, name)
		if err != nil {
			t.Fatalf("volume %s: %v", m.Name, err)
		}
		if items == nil {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			val, ok := data[it.Key]
			if !ok {
				t.Fatalf("volume %s: %s %s has no key %q", m.Name, kind, name, it.Key)
			}
			if err := os.WriteFile(filepath.Join(dir, it.Path), []byte(val), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func rendersClaim(objs []object, name string) bool {
	for _, p := range ofType[corev1.PersistentVolumeClaim](objs) {
		if p.Name == name {
			return true
		}
	}
	return false
}
