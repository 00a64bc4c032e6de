package chartcheck

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkStandalone checks the shared-cache objects around the Deployment: the
// cache volume, a rollout that never runs two proxies on one cache, spreading
// across nodes and zones, and the Service.
func checkStandalone(t *testing.T, objs []object, w workload, exp expectation) {
	t.Helper()
	spec := w.spec()
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
		// Each pod fills its own cache: surge first, so capacity never drops.
		if s := w.strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
			s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
			t.Errorf("strategy %+v with emptyDir caches, want RollingUpdate with maxUnavailable 0", s)
		}
	default:
		if cache.PersistentVolumeClaim == nil || cache.PersistentVolumeClaim.ClaimName != exp.cachePVC {
			t.Errorf("cache volume = %+v, want claim %s", cache.VolumeSource, exp.cachePVC)
		}
		if pvcs := ofType[corev1.PersistentVolumeClaim](objs); len(pvcs) != 1 || pvcs[0].Name != exp.cachePVC {
			t.Errorf("rendered claims do not include %s", exp.cachePVC)
		}
		if w.strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("strategy %q with a claim, want Recreate (one proxy per cache directory)", w.strategy.Type)
		}
	}
	checkSpread(t, w)

	svcs := ofType[corev1.Service](objs)
	if len(svcs) != 1 {
		t.Fatalf("%d Services, want 1", len(svcs))
	}
	svc := svcs[0]
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service ports = %+v, want http 8080 → http", svc.Spec.Ports)
	}
	if !subset(svc.Spec.Selector, w.podLabels()) {
		t.Errorf("Service selector %v does not select pods %v", svc.Spec.Selector, w.podLabels())
	}
}

// checkSpread wants replicas kept off each other's node and spread over zones,
// each term selecting this release's pods (a term selecting nothing does
// nothing, silently).
func checkSpread(t *testing.T, w workload) {
	t.Helper()
	spec := w.spec()
	var hostTerms []corev1.PodAffinityTerm
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		hostTerms = append(hostTerms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, p := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			hostTerms = append(hostTerms, p.PodAffinityTerm)
		}
	}
	if !slices.ContainsFunc(hostTerms, func(term corev1.PodAffinityTerm) bool {
		return term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector != nil && subset(term.LabelSelector.MatchLabels, w.podLabels())
	}) {
		t.Errorf("no pod anti-affinity on kubernetes.io/hostname selecting the pods: %+v", spec.Affinity)
	}
	if !slices.ContainsFunc(spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "topology.kubernetes.io/zone" && c.LabelSelector != nil && subset(c.LabelSelector.MatchLabels, w.podLabels())
	}) {
		t.Errorf("no zone topology spread selecting the pods: %+v", spec.TopologySpreadConstraints)
	}
}

// checkDisruptionBudget wants a budget exactly when there is more than one
// replica, and then one that allows some disruptions but not all of them: a
// budget of zero blocks node drains for good, one of all protects nothing.
func checkDisruptionBudget(t *testing.T, objs []object, w workload) {
	t.Helper()
	pdbs := ofType[policyv1.PodDisruptionBudget](objs)
	replicas := int(*w.replicas)
	if replicas <= 1 {
		if len(pdbs) != 0 {
			t.Errorf("%d PodDisruptionBudgets for %d replica(s): it either blocks drains or protects nothing", len(pdbs), replicas)
		}
		return
	}
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets for %d replicas, want 1", len(pdbs), replicas)
	}
	pdb := pdbs[0]
	if pdb.Spec.Selector == nil || !subset(pdb.Spec.Selector.MatchLabels, w.podLabels()) {
		t.Errorf("PDB selector %+v does not select the pods", pdb.Spec.Selector)
	}
	var allowed int
	switch {
	case (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil):
		t.Fatal("PDB must set exactly one of minAvailable and maxUnavailable")
	case pdb.Spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		allowed = replicas - n
	default:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		allowed = n
	}
	if allowed < 1 || allowed >= replicas {
		t.Errorf("PDB allows %d of %d pods down; want at least 1 and fewer than all", allowed, replicas)
	}
}

// checkMonitors wants every ServiceMonitor and PodMonitor to reach hubproxy's
// metrics port on this release's pods.
func checkMonitors(t *testing.T, objs []object, w workload) {
	t.Helper()
	hp, _ := findContainer(w.spec(), hubproxyContainer)
	for _, sm := range ofType[ServiceMonitor](objs) {
		svcs := ofType[corev1.Service](objs)
		if len(svcs) != 1 || !subset(sm.Spec.Selector.MatchLabels, svcs[0].Labels) || !subset(svcs[0].Spec.Selector, w.podLabels()) {
			t.Errorf("ServiceMonitor selector %v does not reach the pods through the Service", sm.Spec.Selector.MatchLabels)
		}
		checkScrape(t, "ServiceMonitor", sm.Spec.NamespaceSelector, sm.Spec.Endpoints, hp)
	}
	for _, pm := range ofType[PodMonitor](objs) {
		if !subset(pm.Spec.Selector.MatchLabels, w.podLabels()) {
			t.Errorf("PodMonitor selector %v does not select pods %v", pm.Spec.Selector.MatchLabels, w.podLabels())
		}
		checkScrape(t, "PodMonitor", pm.Spec.NamespaceSelector, pm.Spec.PodMetricsEndpoints, hp)
	}
}

func checkScrape(t *testing.T, kind string, ns NamespaceSelector, eps []Endpoint, hp *corev1.Container) {
	t.Helper()
	if !slices.Contains(ns.MatchNames, namespace) {
		t.Errorf("%s namespaces %v lack %s", kind, ns.MatchNames, namespace)
	}
	if len(eps) != 1 || eps[0].Path != "/metrics" || !slices.ContainsFunc(hp.Ports, func(p corev1.ContainerPort) bool { return p.Name == eps[0].Port }) {
		t.Errorf("%s endpoints = %+v, want /metrics on a port of hubproxy (%+v)", kind, eps, hp.Ports)
	}
}

// checkNetworkPolicy wants inbound only to the ports the pod declares and only
// from listed peers, and outbound at least what reaching the configured
// upstream takes (DNS for a name, its port).
func checkNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, w workload, cfg map[string]any) {
	t.Helper()
	if !subset(np.Spec.PodSelector.MatchLabels, w.podLabels()) {
		t.Errorf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector.MatchLabels, w.podLabels())
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes = %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	var declared []string
	for _, c := range slices.Concat(w.spec().InitContainers, w.spec().Containers) {
		for _, p := range c.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			declared = append(declared, fmt.Sprintf("%s/%d", proto, p.ContainerPort))
		}
	}
	slices.Sort(declared)
	if len(np.Spec.Ingress) == 0 {
		t.Error("NetworkPolicy has no ingress rule")
	}
	for _, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Error("ingress rule without peers admits everyone")
		}
		got := portsOf(r.Ports)
		slices.Sort(got)
		if !slices.Equal(got, declared) {
			t.Errorf("ingress ports = %v, want the pod's declared ports %v", got, declared)
		}
	}
	var egress []string
	for _, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("egress rule %+v opens every port", r)
		}
		egress = append(egress, portsOf(r.Ports)...)
	}
	up, _ := cfg["upstream"].(string)
	if strings.HasPrefix(up, "dir:") {
		return
	}
	u, err := url.Parse(up)
	if err != nil {
		t.Fatalf("upstream %q: %v", up, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if !slices.Contains(egress, "TCP/"+port) {
		t.Errorf("egress %v does not reach upstream %s on port %s", egress, up, port)
	}
	if net.ParseIP(u.Hostname()) == nil && !slices.Contains(egress, "UDP/53") {
		t.Errorf("egress %v lacks DNS, needed to resolve %s", egress, u.Hostname())
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

// checkSidecar checks hubproxy's place in the user's workload: start ordering,
// HF_ENDPOINT and the admin socket in exactly the injected containers, the
// cache shared read-only, and GPU driver injection only when asked for.
func checkSidecar(t *testing.T, w workload, cfg map[string]any, exp expectation) {
	t.Helper()
	spec := w.spec()
	if want := cmp(exp.kind, "Deployment"); w.kind != want {
		t.Errorf("workload is a %s, want %s", w.kind, want)
	}
	hp, init := findContainer(spec, hubproxyContainer)
	if hp == nil {
		t.Fatal("no hubproxy container")
	}
	native := init && hp.RestartPolicy != nil && *hp.RestartPolicy == corev1.ContainerRestartPolicyAlways
	if native != exp.native || (!exp.native && init) {
		t.Errorf("hubproxy native sidecar = %v (initContainer %v), want %v", native, init, exp.native)
	}
	if native && spec.InitContainers[0].Name != hubproxyContainer {
		t.Error("native hubproxy is not the first init container: init containers before it cannot download")
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", listenPort(t, cfg))
	var injected []string
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name == hubproxyContainer {
			continue
		}
		e := findEnv(c, "HF_ENDPOINT")
		if e == nil {
			continue
		}
		injected = append(injected, c.Name)
		if e.Value != endpoint {
			t.Errorf("%s: HF_ENDPOINT = %q, want %s", c.Name, e.Value, endpoint)
		}
		if dir := socketDir(cfg); dir != "" && mountAt(c, dir) != socketVolume {
			t.Errorf("%s does not mount the %s volume at %s", c.Name, socketVolume, dir)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "cache" && !m.ReadOnly {
				t.Errorf("%s mounts hubproxy's cache writable at %s: only hubproxy may write it", c.Name, m.MountPath)
			}
		}
	}
	if !slices.Equal(injected, exp.injected) {
		t.Errorf("containers with HF_ENDPOINT = %v, want %v", injected, exp.injected)
	}
	seen := map[string]bool{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
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
	if !slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool {
		q, ok := c.Resources.Limits[gpuResource]
		return ok && q.Value() >= 1
	}) {
		t.Errorf("GPU staging on, but no container of the pod requests %s", gpuResource)
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
