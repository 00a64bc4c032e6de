package chartcheck

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// dummyToken is the fake upstream token the ci/ values files set; it may
// appear in a Secret only.
const dummyToken = "hf_chartcheckDummyTokenNotARealOne"

// expectation is what one scenario must render, beyond the checks every
// scenario gets.
type expectation struct {
	kinds    map[string]int            // exact number of objects per kind
	tokenRef *corev1.SecretKeySelector // HUBPROXY_UPSTREAM_TOKEN's source; nil: no token
	replicas int32
	cachePVC string // claim holding the cache; "" = an emptyDir (standalone only)
	upstream string // config upstream; "" = not checked
	caBundle string // ConfigMap or Secret holding the CA bundle; "" = none
	// upstreamDir: a dir: upstream, whose directory must be a volume.
	upstreamDir bool
	// The shared store: its URL's scheme ("" = none), the Secret its keys
	// come from ("" = none: a pod role), for file:// the claim mounted at
	// its directory, and the Secret holding the cluster's sealing secret.
	storeScheme, storeSecret, storeClaim, storeSeal string

	sidecar  bool     // mode: sidecar
	kind     string   // kind of the sidecar's workload; "" = Deployment
	native   bool     // hubproxy is a native sidecar (initContainer, restartPolicy Always)
	gpu      bool     // CUDA image and NVIDIA_* injection on the sidecar
	injected []string // the workload's containers that download through hubproxy
}

// standaloneKinds is what every standalone rendering holds. No PDB: with one
// replica a budget either blocks node drains or protects nothing.
func standaloneKinds(extra map[string]int) map[string]int {
	k := map[string]int{"ConfigMap": 1, "ServiceAccount": 1, "Deployment": 1, "Service": 1}
	maps.Copy(k, extra)
	return k
}

// expectations lists one entry per scenario; a new ci/ or examples/ values
// file must add its own, so that nobody adds a rendering nobody checks.
func expectations() map[string]expectation {
	chartToken := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hubproxy-upstream-token"}, Key: "token"}
	return map[string]expectation{
		defaultScenario: {
			kinds:    standaloneKinds(map[string]int{"PersistentVolumeClaim": 1}),
			replicas: 1,
			cachePVC: "hubproxy-cache",
		},
		"full": {
			kinds: standaloneKinds(map[string]int{"ConfigMap": 2, "PersistentVolumeClaim": 1, "Secret": 1,
				"ServiceMonitor": 1, "NetworkPolicy": 1, "PrometheusRule": 1, "Ingress": 1}),
			tokenRef: chartToken,
			replicas: 1,
			cachePVC: "hubproxy-cache",
			caBundle: "corp-ca",
		},
		"emptydir": {
			kinds:    standaloneKinds(map[string]int{"PodDisruptionBudget": 1}),
			tokenRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "HF_TOKEN"},
			replicas: 3,
		},
		"airgapped": {
			kinds:       standaloneKinds(map[string]int{"PersistentVolumeClaim": 1, "NetworkPolicy": 1}),
			replicas:    1,
			cachePVC:    "hubproxy-cache",
			upstream:    "dir:/models",
			upstreamDir: true,
		},
		"cluster-file": {
			kinds:       standaloneKinds(map[string]int{"PodDisruptionBudget": 1}),
			replicas:    2,
			storeScheme: "file",
			storeClaim:  "hubproxy-shared",
			storeSeal:   "hubproxy-store-secret",
		},
		examplePrefix + "cluster-s3": {
			kinds:       standaloneKinds(map[string]int{"PodDisruptionBudget": 1}),
			replicas:    3,
			storeScheme: "s3",
			storeSecret: "hubproxy-s3",
			storeSeal:   "hubproxy-store-secret",
		},
		"sidecar": {
			kinds:    map[string]int{"ConfigMap": 1, "ServiceAccount": 1, "Secret": 1, "Deployment": 1, "PodDisruptionBudget": 1, "PodMonitor": 1, "NetworkPolicy": 1},
			tokenRef: chartToken,
			replicas: 2,
			sidecar:  true,
			native:   true,
			gpu:      true,
			upstream: "http://hubproxy.hubproxy.svc.cluster.local:8080",
			injected: []string{"vllm"},
		},
		"sidecar-plain": {
			kinds:    map[string]int{"ConfigMap": 1, "ServiceAccount": 1, "StatefulSet": 1},
			replicas: 1,
			sidecar:  true,
			kind:     "StatefulSet",
			injected: []string{"embedder"},
		},
		examplePrefix + "sidecar-vllm": {
			kinds:    map[string]int{"ConfigMap": 1, "ServiceAccount": 1, "Deployment": 1},
			replicas: 1,
			sidecar:  true,
			native:   true,
			injected: []string{"vllm"},
		},
	}
}

// TestChart renders every scenario, decodes each manifest strictly and checks
// the chart's invariants on the typed objects.
func TestChart(t *testing.T) {
	rendered := renderAll(t)
	allowed := allowedConfigKeys(t)
	exps := expectations()
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			exp, ok := exps[sc.name]
			if !ok {
				t.Fatalf("no expectation for scenario %q: add one to expectations()", sc.name)
			}
			objs, err := decodeAll(rendered[sc.name])
			if err != nil {
				t.Fatalf("strict decoding:\n%v", err)
			}
			checkKinds(t, objs, exp.kinds)
			checkMetadata(t, objs)
			checkNoSecretInConfigMaps(t, objs)
			cfg := checkConfigMap(t, objs, allowed)
			if sc.name == defaultScenario {
				checkDefaultsMirrorConfigFile(t, cfg)
			}
			if exp.upstream != "" && cfg["upstream"] != exp.upstream {
				t.Errorf("config upstream = %v, want %s", cfg["upstream"], exp.upstream)
			}
			ws := workloads(objs)
			if len(ws) != 1 {
				t.Fatalf("%d workloads, want 1", len(ws))
			}
			w := ws[0]
			if got := w.replicas; got == nil || *got != exp.replicas {
				t.Errorf("replicas = %v, want %d", got, exp.replicas)
			}
			checkHubproxyPod(t, objs, w, cfg, exp)
			checkSharedStore(t, w, cfg, exp)
			checkDisruptionBudget(t, objs, w)
			checkMonitors(t, objs, w)
			checkIngress(t, objs, w)
			for _, np := range ofType[networkPolicy](objs) {
				checkNetworkPolicy(t, np, w, cfg)
			}
			if exp.sidecar {
				checkSidecar(t, w, cfg, exp)
			} else {
				checkStandalone(t, objs, w, exp)
			}
		})
	}
}

// checkKinds demands exactly the expected objects, so an optional object
// (ServiceMonitor, NetworkPolicy, Secret) appears only when enabled.
func checkKinds(t *testing.T, objs []object, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, o := range objs {
		got[o.Kind]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("rendered kinds = %v, want %v", got, want)
	}
}

// checkMetadata wants every object in the release namespace with the standard
// app.kubernetes.io labels.
func checkMetadata(t *testing.T, objs []object) {
	t.Helper()
	required := []string{
		"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
		"app.kubernetes.io/managed-by", "helm.sh/chart",
	}
	for _, o := range objs {
		m := metaOf(o)
		if m.GetNamespace() != namespace {
			t.Errorf("%s %s: namespace %q, want %q", o.Kind, m.GetName(), m.GetNamespace(), namespace)
		}
		for _, l := range required {
			if m.GetLabels()[l] == "" {
				t.Errorf("%s %s: missing label %s (has %v)", o.Kind, m.GetName(), l, slices.Sorted(maps.Keys(m.GetLabels())))
			}
		}
		if m.GetLabels()["app.kubernetes.io/instance"] != release {
			t.Errorf("%s %s: instance label %q, want %q", o.Kind, m.GetName(), m.GetLabels()["app.kubernetes.io/instance"], release)
		}
	}
}
