package chartcheck

import (
	"strings"
	"testing"
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
