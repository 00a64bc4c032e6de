package chartcheck

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// portNamed is the container port of c called name, or nil.
func portNamed(c *corev1.Container, name string) *corev1.ContainerPort {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

// TestS3PortRender: config.s3-listen gives hubproxy's container a port
// "s3" in both modes, and standalone's Service a port s3 (service.s3Port)
// that targets it; unset, neither appears.
func TestS3PortRender(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		port  int32 // the container port; 0: none
		svc   int32 // the Service's s3 port; 0: none (or no Service)
	}{
		{"standalone off", nil, 0, 0},
		{"standalone", []string{"--set", "config.s3-listen=:9000"}, 9000, 9000},
		{"standalone s3Port", []string{"--set", "config.s3-listen=:9100", "--set", "service.s3Port=19000"}, 9100, 19000},
		{"sidecar off", []string{"--values", "../hubproxy/ci/sidecar-plain-values.yaml"}, 0, 0},
		{"sidecar", []string{"--values", "../hubproxy/ci/sidecar-plain-values.yaml", "--set", "config.s3-listen=:9000"}, 9000, 0},
	} {
		objs := renderWith(t, c.flags...)
		ws := workloads(objs)
		if len(ws) != 1 {
			t.Fatalf("%s: %d workloads", c.name, len(ws))
		}
		hp, _ := findContainer(ws[0].spec(), hubproxyContainer)
		if hp == nil {
			t.Fatalf("%s: no hubproxy container", c.name)
		}
		p := portNamed(hp, "s3")
		switch {
		case c.port == 0 && p != nil:
			t.Errorf("%s: s3 port %+v without s3-listen", c.name, p)
		case c.port != 0 && (p == nil || p.ContainerPort != c.port):
			t.Errorf("%s: s3 container port %+v; want %d", c.name, p, c.port)
		}
		var svcPort *corev1.ServicePort
		for _, s := range ofType[corev1.Service](objs) {
			for i := range s.Spec.Ports {
				if s.Spec.Ports[i].Name == "s3" {
					svcPort = &s.Spec.Ports[i]
				}
			}
		}
		switch {
		case c.svc == 0 && svcPort != nil:
			t.Errorf("%s: Service port %+v", c.name, svcPort)
		case c.svc != 0 && (svcPort == nil || svcPort.Port != c.svc || svcPort.TargetPort.String() != "s3"):
			t.Errorf("%s: Service s3 port %+v; want %d → s3", c.name, svcPort, c.svc)
		}
	}
	if _, err := tryRender("--set", "config.s3-listen=9000"); err == nil {
		t.Error("s3-listen without a colon rendered")
	}
}
