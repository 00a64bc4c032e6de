package chartcheck

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// configKey is the ConfigMap key holding hubproxy's config file.
const configKey = "hubproxy.yaml"

// chartCacheDir is the one default the chart changes: the root filesystem is
// read-only, so the cache lives on its volume, not under $HOME.
const chartCacheDir = "/var/cache/hubproxy"

// plannedKeys are config keys the chart sets before the binary documents them
// in configs/hubproxy.yaml, with their planned defaults. Once a key is in that
// file, the file's default is checked instead.
func plannedKeys() map[string]any {
	return map[string]any{
		"admin-listen":            "unix:///run/hubproxy/admin.sock",
		"gpu-driver-path":         "libcuda.so.1",
		"gpu-lease-ttl":           "10m",
		"gpu-device-budget-bytes": "0",
	}
}

// configFileDefaults reads configs/hubproxy.yaml: every key the binary knows,
// with its default.
func configFileDefaults(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", configFile, err)
	}
	if len(m) == 0 {
		t.Fatalf("%s holds no keys", configFile)
	}
	return m
}

// allowedConfigKeys is the set the ConfigMap may use: the config file's keys
// plus the planned ones, never the token.
func allowedConfigKeys(t *testing.T) map[string]bool {
	t.Helper()
	allowed := map[string]bool{}
	for k := range configFileDefaults(t) {
		allowed[k] = true
	}
	for k := range plannedKeys() {
		allowed[k] = true
	}
	delete(allowed, "upstream-token")
	delete(allowed, "shared-store-secret") // sharedStore.secret, mounted from a Secret
	return allowed
}

// configMapOf returns the one ConfigMap holding hubproxy.yaml (others, such
// as the dashboard's, hold other files).
func configMapOf(t *testing.T, objs []object) *corev1.ConfigMap {
	t.Helper()
	var found []*corev1.ConfigMap
	for _, cm := range ofType[corev1.ConfigMap](objs) {
		if _, ok := cm.Data[configKey]; ok {
			found = append(found, cm)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ConfigMaps hold %s, want 1", len(found), configKey)
	}
	return found[0]
}

// checkConfigMap finds the config ConfigMap, parses its hubproxy.yaml strictly
// and checks every key is one hubproxy knows. It returns the parsed config.
func checkConfigMap(t *testing.T, objs []object, allowed map[string]bool) map[string]any {
	t.Helper()
	raw := configMapOf(t, objs).Data[configKey]
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
		t.Fatalf("%s: %v\n%s", configKey, err, raw)
	}
	for k := range cfg {
		if !allowed[k] {
			t.Errorf("%s key %q is not a hubproxy config key (known: %v)", configKey, k, slices.Sorted(maps.Keys(allowed)))
		}
	}
	return cfg
}

// checkDefaultsMirrorConfigFile wants the chart's default config to be
// configs/hubproxy.yaml key for key and value for value, except the token and
// the shared-store secret (Secrets) and cache-dir (the volume).
func checkDefaultsMirrorConfigFile(t *testing.T, cfg map[string]any) {
	t.Helper()
	want := plannedKeys()
	maps.Copy(want, configFileDefaults(t))
	delete(want, "upstream-token")
	delete(want, "shared-store-secret")
	want["cache-dir"] = chartCacheDir
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := cfg[k]
		if !ok {
			t.Errorf("values.yaml config lacks key %q (default %v)", k, want[k])
			continue
		}
		if !reflect.DeepEqual(got, want[k]) {
			t.Errorf("values.yaml config %s = %#v, want the binary's default %#v", k, got, want[k])
		}
	}
	for k := range cfg {
		if _, ok := want[k]; !ok {
			t.Errorf("values.yaml config has extra key %q", k)
		}
	}
}

// checkNoSecretInConfigMaps wants no Secret value, and never the ci/ dummy
// token, anywhere in a ConfigMap.
func checkNoSecretInConfigMaps(t *testing.T, objs []object) {
	t.Helper()
	secrets := []string{dummyToken}
	for _, s := range ofType[corev1.Secret](objs) {
		for _, v := range s.Data {
			secrets = append(secrets, string(v))
		}
		for _, v := range s.StringData {
			secrets = append(secrets, v)
		}
	}
	for _, cm := range ofType[corev1.ConfigMap](objs) {
		for key, v := range cm.Data {
			if strings.Contains(v, "upstream-token") {
				t.Errorf("ConfigMap %s/%s mentions upstream-token", cm.Name, key)
			}
			for _, s := range secrets {
				if s != "" && strings.Contains(v, s) {
					t.Errorf("ConfigMap %s/%s contains a secret value", cm.Name, key)
				}
			}
		}
		for key, v := range cm.BinaryData {
			for _, s := range secrets {
				if s != "" && strings.Contains(string(v), s) {
					t.Errorf("ConfigMap %s/%s contains a secret value", cm.Name, key)
				}
			}
		}
	}
}
