package chartcheck

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// checkIngress wants every path of every rendered Ingress to route to the
// rendered Service's http port, and that port to target hubproxy's hub API
// container port: never the admin API, which spends GPU memory and deletes
// cache data, nor anything else.
func checkIngress(t *testing.T, objs []object, w workload) {
	t.Helper()
	ings := ofType[networkingv1.Ingress](objs)
	if len(ings) == 0 {
		return
	}
	svcs := ofType[corev1.Service](objs)
	if len(svcs) != 1 {
		t.Fatalf("an Ingress and %d Services, want 1", len(svcs))
	}
	svc := svcs[0]
	hp, _ := findContainer(w.spec(), hubproxyContainer)
	if hp == nil {
		t.Fatalf("no %s container", hubproxyContainer)
	}
	// What a port name of the Service reaches in the pod.
	reaches := map[string]string{}
	for _, p := range svc.Spec.Ports {
		reaches[p.Name] = p.TargetPort.String()
	}
	for _, ing := range ings {
		if ing.Spec.DefaultBackend != nil {
			t.Errorf("Ingress %s has a default backend %+v: only its rules may route", ing.Name, ing.Spec.DefaultBackend)
		}
		if len(ing.Spec.Rules) == 0 {
			t.Errorf("Ingress %s has no rules", ing.Name)
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil || len(r.HTTP.Paths) == 0 {
				t.Errorf("Ingress %s: rule for host %q has no paths", ing.Name, r.Host)
				continue
			}
			for _, p := range r.HTTP.Paths {
				b := p.Backend.Service
				switch {
				case b == nil:
					t.Errorf("Ingress %s %s%s: backend %+v is not the Service", ing.Name, r.Host, p.Path, p.Backend)
				case b.Name != svc.Name:
					t.Errorf("Ingress %s %s%s routes to Service %q, want %q", ing.Name, r.Host, p.Path, b.Name, svc.Name)
				case b.Port.Name != "http" || b.Port.Number != 0:
					t.Errorf("Ingress %s %s%s routes to port %+v, want the Service's http port by name", ing.Name, r.Host, p.Path, b.Port)
				case reaches["http"] != "http" || len(hp.Ports) != 1 || hp.Ports[0].Name != "http":
					t.Errorf("the Service's http port reaches %q; want hubproxy's one container port, http (it has %+v)", reaches["http"], hp.Ports)
				}
				if p.PathType == nil {
					t.Errorf("Ingress %s %s%s has no pathType (networking.k8s.io/v1 requires one)", ing.Name, r.Host, p.Path)
				}
			}
		}
	}
}

// TestIngressRender: off by default; on, it routes each host's paths to the
// hub API only, with the class, annotations and TLS given, even when the
// admin API listens on a loopback port of its own.
func TestIngressRender(t *testing.T) {
	if ings := ofType[networkingv1.Ingress](renderWith(t)); len(ings) != 0 {
		t.Errorf("default values render %d Ingresses, want none", len(ings))
	}
	objs := renderWith(t, "--set", "ingress.enabled=true", "--set", "ingress.className=nginx",
		"--set", "ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt",
		"--set", "ingress.hosts[0].host=hub.example.com",
		"--set", "ingress.hosts[1].host=models.example.com",
		"--set", "ingress.hosts[1].paths[0].path=/api", "--set", "ingress.hosts[1].paths[0].pathType=Prefix",
		"--set", "ingress.hosts[1].paths[1].path=/models", "--set", "ingress.hosts[1].paths[1].pathType=Exact",
		"--set", "ingress.tls[0].secretName=hub-tls", "--set", "ingress.tls[0].hosts[0]=hub.example.com",
		"--set", "config.admin-listen=127.0.0.1:8081")
	ings := ofType[networkingv1.Ingress](objs)
	if len(ings) != 1 {
		t.Fatalf("%d Ingresses, want 1", len(ings))
	}
	ws := workloads(objs)
	if len(ws) != 1 {
		t.Fatalf("%d workloads, want 1", len(ws))
	}
	checkIngress(t, objs, ws[0])
	checkMetadata(t, []object{{Kind: "Ingress", Obj: ings[0]}})
	ing := ings[0]
	if c := ing.Spec.IngressClassName; c == nil || *c != "nginx" {
		t.Errorf("ingressClassName = %v, want nginx", c)
	}
	if got := ing.Annotations["cert-manager.io/cluster-issuer"]; got != "letsencrypt" {
		t.Errorf("annotations = %v, want the cert-manager one", ing.Annotations)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "hub-tls" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{"hub.example.com"}) {
		t.Errorf("tls = %+v, want hub-tls for hub.example.com", ing.Spec.TLS)
	}
	var routes []string
	for _, r := range ing.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			routes = append(routes, r.Host+p.Path+" "+string(*p.PathType))
		}
	}
	want := []string{"hub.example.com/ Prefix", "models.example.com/api Prefix", "models.example.com/models Exact"}
	if !slices.Equal(routes, want) {
		t.Errorf("routes = %v, want %v (a host without paths gets / as a Prefix)", routes, want)
	}
	// Nothing the chart renders exposes the admin port, whoever routes to it.
	for _, svc := range ofType[corev1.Service](objs) {
		for _, p := range svc.Spec.Ports {
			if p.Port == 8081 || p.TargetPort.IntValue() == 8081 || p.TargetPort.String() != "http" {
				t.Errorf("Service %s port %+v reaches something besides the hub API", svc.Name, p)
			}
		}
	}
}

// TestServiceRender: the node port and the load balancer's fields reach the
// Service as given, and none of them appears unless asked for.
func TestServiceRender(t *testing.T) {
	service := func(flags ...string) corev1.Service {
		t.Helper()
		svcs := ofType[corev1.Service](renderWith(t, flags...))
		if len(svcs) != 1 || len(svcs[0].Spec.Ports) != 1 {
			t.Fatalf("Services %+v, want one with one port", svcs)
		}
		return *svcs[0]
	}
	def := service()
	if def.Spec.Type != corev1.ServiceTypeClusterIP || def.Spec.Ports[0].NodePort != 0 || def.Spec.LoadBalancerIP != "" || def.Spec.LoadBalancerSourceRanges != nil {
		t.Errorf("default Service spec %+v, want a plain ClusterIP", def.Spec)
	}
	np := service("--set", "service.type=NodePort", "--set", "service.nodePort=30080")
	if np.Spec.Type != corev1.ServiceTypeNodePort || np.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("NodePort Service: type %s, nodePort %d; want NodePort 30080", np.Spec.Type, np.Spec.Ports[0].NodePort)
	}
	if auto := service("--set", "service.type=NodePort"); auto.Spec.Ports[0].NodePort != 0 {
		t.Errorf("nodePort 0 rendered as %d, want it left to the cluster", auto.Spec.Ports[0].NodePort)
	}
	lb := service("--set", "service.type=LoadBalancer", "--set", "service.nodePort=30081",
		"--set", "service.loadBalancerIP=203.0.113.7", "--set", "service.loadBalancerSourceRanges={10.0.0.0/8,192.168.0.0/16}")
	if lb.Spec.Type != corev1.ServiceTypeLoadBalancer || lb.Spec.LoadBalancerIP != "203.0.113.7" || lb.Spec.Ports[0].NodePort != 30081 ||
		!slices.Equal(lb.Spec.LoadBalancerSourceRanges, []string{"10.0.0.0/8", "192.168.0.0/16"}) {
		t.Errorf("LoadBalancer Service spec %+v, want the IP, node port and source ranges given", lb.Spec)
	}
}

// TestServiceAccountAutomountRender: no API token in the pods unless
// serviceAccount.automount says so, and then in both modes, on the
// ServiceAccount and the pod alike.
func TestServiceAccountAutomountRender(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  bool
	}{
		{"standalone default", nil, false},
		{"standalone automount", []string{"--set", "serviceAccount.automount=true"}, true},
		{"sidecar default", sidecarWorkload, false},
		{"sidecar automount", append([]string{"--set", "serviceAccount.automount=true"}, sidecarWorkload...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderWith(t, tc.flags...)
			sas := ofType[corev1.ServiceAccount](objs)
			if len(sas) != 1 || sas[0].AutomountServiceAccountToken == nil || *sas[0].AutomountServiceAccountToken != tc.want {
				t.Errorf("ServiceAccount automountServiceAccountToken: %+v, want %v", sas, tc.want)
			}
			ws := workloads(objs)
			if len(ws) != 1 {
				t.Fatalf("%d workloads, want 1", len(ws))
			}
			// Explicit on the pod too: a pod's own false wins over the
			// ServiceAccount, and a bare default would be true.
			if a := ws[0].spec().AutomountServiceAccountToken; a == nil || *a != tc.want {
				t.Errorf("pod automountServiceAccountToken = %v, want %v", a, tc.want)
			}
		})
	}
}

// TestExposureValuesRefused: values for the Service and Ingress that would
// expose nothing, or something the API server refuses, fail at render time
// saying which value to change.
func TestExposureValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"an Ingress in sidecar mode", append([]string{"--set", "ingress.enabled=true"}, sidecarWorkload...), "ingress: sidecar pods have no Service"},
		{"an Ingress without hosts", []string{"--set", "ingress.enabled=true", "--set-json", "ingress.hosts=[]"}, "ingress.hosts"},
		{"an Ingress path that is not absolute", []string{"--set", "ingress.hosts[0].paths[0].path=api"}, "pattern '^/'"},
		{"an Ingress path type Kubernetes lacks", []string{"--set", "ingress.hosts[0].paths[0].path=/", "--set", "ingress.hosts[0].paths[0].pathType=Regex"}, "pathType"},
		{"an Ingress backend given by hand", []string{"--set", "ingress.hosts[0].paths[0].path=/", "--set", "ingress.hosts[0].paths[0].backend.service.name=admin"}, "backend"},
		{"a node port on a ClusterIP Service", []string{"--set", "service.nodePort=30080"}, "service.nodePort"},
		{"a load balancer IP without a load balancer", []string{"--set", "service.type=NodePort", "--set", "service.loadBalancerIP=203.0.113.7"}, "LoadBalancer"},
		{"source ranges without a load balancer", []string{"--set", "service.loadBalancerSourceRanges={10.0.0.0/8}"}, "LoadBalancer"},
		{"a source range that is not a CIDR", []string{"--set", "service.type=LoadBalancer", "--set", "service.loadBalancerSourceRanges={10.0.0.0}"}, "loadBalancerSourceRanges"},
		{"automount as a string", []string{"--set-string", "serviceAccount.automount=yes"}, "automount"},
		{"the pod's automount through podSpec", append([]string{"--set", "sidecar.workload.podSpec.automountServiceAccountToken=true"}, sidecarWorkload...), "serviceAccount.automount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tryRender(tc.flags...)
			if err == nil {
				t.Fatalf("helm rendered %v (%d bytes); want a refusal mentioning %q", tc.flags, len(out), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refusal does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}
