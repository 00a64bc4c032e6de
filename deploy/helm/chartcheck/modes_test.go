package chartcheck

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// checkStandalone checks the shared-cache objects around the Deployment.
func checkStandalone(t *testing.T, objs []object, dep *deployment, exp expectation) {
	t.Helper()
	spec := &dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Labels
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser != nonrootUID || psc.FSGroup == nil || *psc.FSGroup != nonrootUID {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser and fsGroup %d", psc, nonrootUID)
	}

	cache := findVolume(spec, "cache")
	switch {
	case cache == nil:
		t.Fatal("no cache volume")
	case exp.cachePVC == "":
		if cache.EmptyDir == nil {
			t.Errorf("cache volume = %+v, want an emptyDir", cache.VolumeSource)
		}
	default:
		if cache.PersistentVolumeClaim == nil || cache.PersistentVolumeClaim.ClaimName != exp.cachePVC {
			t.Errorf("cache volume = %+v, want claim %s", cache.VolumeSource, exp.cachePVC)
		}
		if pvcs := ofType[corev1.PersistentVolumeClaim](objs); len(pvcs) != 1 || pvcs[0].Name != exp.cachePVC {
			t.Errorf("rendered claims do not include %s", exp.cachePVC)
		}
		if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("strategy %q with a claim, want Recreate (one proxy per cache directory)", dep.Spec.Strategy.Type)
		}
	}

	svcs := ofType[corev1.Service](objs)
	if len(svcs) != 1 {
		t.Fatalf("%d Services, want 1", len(svcs))
	}
	svc := svcs[0]
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service ports = %+v, want http 8080 → http", svc.Spec.Ports)
	}
	if !subset(svc.Spec.Selector, podLabels) {
		t.Errorf("Service selector %v does not select pods %v", svc.Spec.Selector, podLabels)
	}
	for _, pdb := range ofType[policyv1.PodDisruptionBudget](objs) {
		if pdb.Spec.Selector == nil || !subset(pdb.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("PDB selector %+v does not select the pods", pdb.Spec.Selector)
		}
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Error("PDB must set exactly one of minAvailable and maxUnavailable")
		}
	}
	for _, sm := range ofType[ServiceMonitor](objs) {
		if !subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("ServiceMonitor selector %v does not select Service labels %v", sm.Spec.Selector.MatchLabels, svc.Labels)
		}
		if !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, namespace) {
			t.Errorf("ServiceMonitor namespaces %v lack %s", sm.Spec.NamespaceSelector.MatchNames, namespace)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints = %+v, want port http path /metrics", sm.Spec.Endpoints)
		}
	}
	for _, np := range ofType[networkingv1.NetworkPolicy](objs) {
		checkNetworkPolicy(t, np, podLabels)
	}
}

// checkNetworkPolicy wants inbound only to 8080/TCP from listed peers, and
// outbound DNS and HTTPS.
func checkNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, podLabels map[string]string) {
	t.Helper()
	if !subset(np.Spec.PodSelector.MatchLabels, podLabels) {
		t.Errorf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector.MatchLabels, podLabels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes = %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Error("NetworkPolicy has no ingress rule")
	}
	for _, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Error("ingress rule without peers admits everyone")
		}
		if got := portsOf(r.Ports); !slices.Equal(got, []string{"TCP/8080"}) {
			t.Errorf("ingress ports = %v, want only TCP/8080", got)
		}
	}
	var egress []string
	for _, r := range np.Spec.Egress {
		egress = append(egress, portsOf(r.Ports)...)
	}
	for _, want := range []string{"UDP/53", "TCP/53", "TCP/443"} {
		if !slices.Contains(egress, want) {
			t.Errorf("egress %v lacks %s", egress, want)
		}
	}
}

func portsOf(ports []networkingv1.NetworkPolicyPort) []string {
	var out []string
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		out = append(out, fmt.Sprintf("%s/%s", proto, p.Port.String()))
	}
	return out
}

// checkSidecar checks the example inference pod: HF_ENDPOINT, the shared admin
// socket, start ordering and GPU driver injection.
func checkSidecar(t *testing.T, dep *deployment, cfg map[string]any, exp expectation) {
	t.Helper()
	spec := &dep.Spec.Template.Spec
	hp, init := findContainer(spec, hubproxyContainer)
	var inf *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name != hubproxyContainer {
			inf = &spec.Containers[i]
		}
	}
	if hp == nil || inf == nil {
		t.Fatal("sidecar pod needs a hubproxy and an inference container")
	}
	if e := findEnv(inf, "HF_ENDPOINT"); e == nil || e.Value != fmt.Sprintf("http://127.0.0.1:%d", listenPort(t, cfg)) {
		t.Errorf("inference HF_ENDPOINT = %+v, want http://127.0.0.1:%d", e, listenPort(t, cfg))
	}
	if dir := socketDir(cfg); dir != "" {
		for _, c := range []*corev1.Container{hp, inf} {
			if mountAt(c, dir) != socketVolume {
				t.Errorf("%s does not mount the %s volume at %s", c.Name, socketVolume, dir)
			}
		}
	}
	native := init && hp.RestartPolicy != nil && *hp.RestartPolicy == corev1.ContainerRestartPolicyAlways
	if native != exp.native || (!exp.native && init) {
		t.Errorf("hubproxy native sidecar = %v (initContainer %v), want %v", native, init, exp.native)
	}
	seen := map[string]bool{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, p := range c.Ports {
			if seen[p.Name] {
				t.Errorf("port name %q used twice in the pod", p.Name)
			}
			seen[p.Name] = true
		}
	}

	visible, caps := findEnv(hp, "NVIDIA_VISIBLE_DEVICES"), findEnv(hp, "NVIDIA_DRIVER_CAPABILITIES")
	if _, ok := hp.Resources.Limits[gpuResource]; ok {
		t.Error("hubproxy requests a GPU: the device plugin would give it a different one")
	}
	if !exp.gpu {
		if visible != nil || caps != nil || strings.HasSuffix(hp.Image, "-cuda") {
			t.Errorf("GPU injection without sidecar.gpu: image %s, env %+v %+v", hp.Image, visible, caps)
		}
		return
	}
	if !strings.HasSuffix(hp.Image, "-cuda") {
		t.Errorf("hubproxy image %s is not the CUDA variant", hp.Image)
	}
	if visible == nil || visible.Value == "" {
		t.Error("hubproxy lacks NVIDIA_VISIBLE_DEVICES: the toolkit would not inject libcuda.so.1")
	}
	if caps == nil || caps.Value != "compute,utility" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %+v, want compute,utility", caps)
	}
	if q, ok := inf.Resources.Limits[gpuResource]; !ok || q.Value() < 1 {
		t.Errorf("inference container limits %v lack %s", inf.Resources.Limits, gpuResource)
	}
}
