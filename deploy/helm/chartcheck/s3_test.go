package chartcheck

import (
	"path"
	"strings"
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

// TestS3CredentialsRender: s3Credentials.existingSecret mounts that Secret
// read-only, not readable by others (hubproxy refuses a credentials file
// that is), in the hubproxy container only, and names its file in
// HUBPROXY_S3_CREDENTIALS_FILE, in both modes; unset, none of it. With
// config.s3-credentials-file set too, the chart refuses to render.
func TestS3CredentialsRender(t *testing.T) {
	const secret = "team-s3-keys"
	for _, c := range []struct {
		name  string
		flags []string
		want  bool
	}{
		{"standalone off", nil, false},
		{"standalone", []string{"--set", "s3Credentials.existingSecret=" + secret}, true},
		{"sidecar off", []string{"--values", "../hubproxy/ci/sidecar-plain-values.yaml"}, false},
		{"sidecar", []string{"--values", "../hubproxy/ci/sidecar-plain-values.yaml", "--set", "s3Credentials.existingSecret=" + secret}, true},
	} {
		flags := append([]string{"--set", "config.s3-listen=:9000", "--set", "s3Credentials.key=keys.txt"}, c.flags...)
		ws := workloads(renderWith(t, flags...))
		if len(ws) != 1 {
			t.Fatalf("%s: %d workloads", c.name, len(ws))
		}
		spec := ws[0].spec()
		hp, _ := findContainer(spec, hubproxyContainer)
		if hp == nil {
			t.Fatalf("%s: no hubproxy container", c.name)
		}
		e := findEnv(hp, "HUBPROXY_S3_CREDENTIALS_FILE")
		if !c.want {
			if e != nil || findVolume(spec, "s3-credentials") != nil {
				t.Errorf("%s: credentials (%+v) without s3Credentials", c.name, e)
			}
			continue
		}
		if e == nil || e.Value == "" {
			t.Fatalf("%s: HUBPROXY_S3_CREDENTIALS_FILE is not set", c.name)
		}
		dir, file := path.Split(e.Value)
		name := mountAt(hp, strings.TrimSuffix(dir, "/"))
		v := findVolume(spec, name)
		if name == "" || v == nil || v.Secret == nil || v.Secret.SecretName != secret {
			t.Fatalf("%s: %s mounted from %q (%+v), want Secret %s", c.name, e.Value, name, v, secret)
		}
		if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "keys.txt" || v.Secret.Items[0].Path != file ||
			v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
			t.Errorf("%s: Secret volume %+v: want key keys.txt at %q, defaultMode 0400", c.name, v.Secret, file)
		}
		for _, o := range append(spec.InitContainers, spec.Containers...) {
			for _, m := range o.VolumeMounts {
				if m.Name == name && (o.Name != hp.Name || !m.ReadOnly) {
					t.Errorf("%s: container %s mounts the credentials (read-only %v)", c.name, o.Name, m.ReadOnly)
				}
			}
		}
	}
	if _, err := tryRender("--set", "s3Credentials.existingSecret="+secret, "--set", "config.s3-credentials-file=/etc/keys"); err == nil {
		t.Error("s3Credentials.existingSecret with config.s3-credentials-file rendered")
	}
}
