package chartcheck

import (
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// checkSharedStore checks the shared store's wiring: the store's keys come
// from the named Secret (and no AWS key is set otherwise, so a pod role is
// what authenticates), and a file:// store's directory is the RWX claim,
// mounted writable.
func checkSharedStore(t *testing.T, w workload, cfg map[string]any, exp expectation) {
	t.Helper()
	c, _ := findContainer(w.spec(), hubproxyContainer)
	if c == nil {
		t.Fatal("no hubproxy container")
	}
	store, _ := cfg["shared-store"].(string)
	if scheme, _, _ := strings.Cut(store, "://"); store == "" && exp.storeScheme != "" || store != "" && scheme != exp.storeScheme {
		t.Errorf("config shared-store = %q, want a %q store", store, exp.storeScheme)
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		e := findEnv(c, name)
		switch {
		case exp.storeSecret == "" && e != nil:
			t.Errorf("%s is set (%+v) with no store Secret", name, e)
		case exp.storeSecret != "" && (e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != exp.storeSecret || e.ValueFrom.SecretKeyRef.Key != name):
			t.Errorf("%s = %+v, want key %s of Secret %s", name, e, name, exp.storeSecret)
		}
	}
	checkStoreSeal(t, w, c, exp)
	dir, ok := strings.CutPrefix(store, "file://")
	if !ok {
		if findVolume(w.spec(), "shared-store") != nil {
			t.Error("a shared-store volume without a file:// store")
		}
		return
	}
	name := mountAt(c, dir)
	v := findVolume(w.spec(), name)
	if name == "" || v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != exp.storeClaim {
		t.Fatalf("%s: mounted from %q (%+v), want claim %s", dir, name, v, exp.storeClaim)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == name && m.ReadOnly {
			t.Errorf("the shared store at %s is mounted read-only", dir)
		}
	}
}

// checkStoreSeal checks the wiring of the secret that seals the store's
// chunks: with a store, HUBPROXY_SHARED_STORE_SECRET_FILE names a file of a
// read-only mount of the expected Secret, in the hubproxy container only,
// not readable by others, and that Secret is not the store's credentials';
// without a store, none of it.
func checkStoreSeal(t *testing.T, w workload, c *corev1.Container, exp expectation) {
	t.Helper()
	e := findEnv(c, "HUBPROXY_SHARED_STORE_SECRET_FILE")
	if exp.storeSeal == "" {
		if e != nil || findVolume(w.spec(), "shared-store-secret") != nil {
			t.Errorf("a store secret (%+v) without a shared store", e)
		}
		return
	}
	if exp.storeSeal == exp.storeSecret {
		t.Fatalf("expectation: the seal's Secret %q is the credentials'", exp.storeSeal)
	}
	if e == nil || e.Value == "" {
		t.Fatal("HUBPROXY_SHARED_STORE_SECRET_FILE is not set: hubproxy would refuse to start")
	}
	dir, file := path.Split(e.Value)
	name := mountAt(c, strings.TrimSuffix(dir, "/"))
	v := findVolume(w.spec(), name)
	if name == "" || v == nil || v.Secret == nil || v.Secret.SecretName != exp.storeSeal {
		t.Fatalf("%s: mounted from %q (%+v), want Secret %s", e.Value, name, v, exp.storeSeal)
	}
	found := false
	for _, it := range v.Secret.Items {
		found = found || it.Path == file
	}
	if !found || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
		t.Errorf("Secret volume %+v: want item path %q, and no access for others", v.Secret, file)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == name && !m.ReadOnly {
			t.Errorf("the store secret at %s is mounted writable", dir)
		}
	}
	for _, o := range w.spec().Containers {
		if o.Name == c.Name {
			continue
		}
		for _, m := range o.VolumeMounts {
			if m.Name == name {
				t.Errorf("container %s also mounts the store secret", o.Name)
			}
		}
	}
}
