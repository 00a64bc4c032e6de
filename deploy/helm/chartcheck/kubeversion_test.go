package chartcheck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNativeSidecarFollowsKubernetesVersion renders sidecar mode for clusters
// on both sides of 1.29. Below it the API server drops an init container's
// restartPolicy, so a "native" hubproxy would become an init container that
// never exits and the pod would never start: the chart must fall back to an
// ordinary container, or refuse when native was demanded.
func TestNativeSidecarFollowsKubernetesVersion(t *testing.T) {
	for _, tc := range []struct {
		native, kube string
		wantNative   bool
		wantErr      string
	}{
		{"auto", "1.28.9", false, ""},
		{"auto", "1.29.0", true, ""},
		{"auto", "v1.29.2-gke.1200", true, ""},
		{"true", "1.31.0", true, ""},
		{"true", "1.28.0", false, "needs Kubernetes 1.29"},
		{"false", "1.32.0", false, ""},
	} {
		t.Run(tc.native+"@"+tc.kube, func(t *testing.T) {
			flags := append([]string{"--set", "sidecar.native=" + tc.native, "--kube-version", tc.kube}, sidecarWorkload...)
			if tc.wantErr != "" {
				if _, err := tryRender(flags...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			ws := workloads(renderWith(t, flags...))
			if len(ws) != 1 {
				t.Fatalf("%d workloads", len(ws))
			}
			spec := ws[0].spec()
			hp, init := findContainer(spec, hubproxyContainer)
			if hp == nil {
				t.Fatal("no hubproxy container")
			}
			native := hp.RestartPolicy != nil && *hp.RestartPolicy == corev1.ContainerRestartPolicyAlways
			if init != tc.wantNative || native != tc.wantNative {
				t.Errorf("hubproxy initContainer=%v restartPolicy Always=%v, want native=%v", init, native, tc.wantNative)
			}
			if app, _ := findContainer(spec, "app"); app == nil || findEnv(app, "HF_ENDPOINT") == nil {
				t.Error("the workload's container lost HF_ENDPOINT")
			}
		})
	}
}
