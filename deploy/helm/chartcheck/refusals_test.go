package chartcheck

import (
	"strings"
	"testing"
)

// sidecarWorkload is the smallest valid sidecar-mode values: one container.
var sidecarWorkload = []string{"--set", "mode=sidecar",
	"--set", "sidecar.workload.containers[0].name=app", "--set", "sidecar.workload.containers[0].image=example/app:1"}

// TestChartRefuses renders values that would deploy something broken and
// wants helm to fail, naming the value to change: a chart that renders them
// leaves the failure to be found in the cluster, or never.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  string // in helm's error
	}{
		{"GiB as a Kubernetes quantity", []string{"--set", "persistence.size=100GiB"}, "persistence.size"},
		{"GiB as an emptyDir limit", []string{"--set", "persistence.enabled=false", "--set", "persistence.emptyDirSizeLimit=10GiB"}, "emptyDirSizeLimit"},
		{"GiB as the sidecar cache limit", append([]string{"--set", "sidecar.cache.sizeLimit=100GiB"}, sidecarWorkload...), "sidecar.cache.sizeLimit"},
		{"a size hubproxy cannot read", []string{"--set", "config.cache-max-bytes=100 gigs"}, "cache-max-bytes"},
		{"two proxies on one claim", []string{"--set", "replicaCount=2"}, "replicaCount > 1 needs persistence.enabled=false"},
		{"two proxies on a shared claim", []string{"--set", "replicaCount=2", "--set", "persistence.accessModes[0]=ReadWriteMany"}, "replicaCount > 1"},
		{"rolling update on a claim", []string{"--set", "strategy.type=RollingUpdate"}, "only Recreate is safe"},
		{"a budget that blocks drains", []string{"--set", "persistence.enabled=false", "--set", "replicaCount=3", "--set", "podDisruptionBudget.minAvailable=3"}, "allows no disruption"},
		{"a budget of zero", []string{"--set", "persistence.enabled=false", "--set", "replicaCount=3", "--set", "podDisruptionBudget.maxUnavailable=0"}, "allows no disruption"},
		{"a dir: upstream with nothing mounted", []string{"--set", "config.upstream=dir:/models"}, "no volume provides /models"},
		{"a models volume without a dir: upstream", []string{"--set", "upstreamDir.volume.emptyDir.medium="}, "needs config.upstream: dir:"},
		{"a relative dir: upstream", []string{"--set", "config.upstream=dir:models"}, "config.upstream"},
		{"a file:// store with nothing mounted", []string{"--set", "config.shared-store=file:///mnt/shared"}, "no volume provides /mnt/shared"},
		{"a store volume without a file:// store", []string{"--set", "sharedStore.volume.emptyDir.medium="}, "needs config.shared-store: file:///"},
		{"store keys without an s3:// store", []string{"--set", "sharedStore.credentials.existingSecret=s3-keys"}, "not an s3:// URL"},
		{"a store URL hubproxy cannot read", []string{"--set", "config.shared-store=gs://bucket"}, "shared-store"},
		{"a store without its secret", []string{"--set", "config.shared-store=s3://bucket"}, "sharedStore.secret.existingSecret"},
		{"a store secret without a store", []string{"--set", "sharedStore.secret.existingSecret=seal"}, "config.shared-store is not"},
		{"the store secret with the store's keys", []string{"--set", "config.shared-store=s3://bucket",
			"--set", "sharedStore.credentials.existingSecret=s3-keys", "--set", "sharedStore.secret.existingSecret=s3-keys"}, "a Secret of its own"},
		{"two sources of the store secret", []string{"--set", "config.shared-store=s3://bucket",
			"--set", "sharedStore.secret.existingSecret=seal", "--set", "config.shared-store-secret-file=/etc/seal/key"}, "both set"},
		{"the store secret in the ConfigMap", []string{"--set", "config.shared-store=s3://bucket", "--set", "config.shared-store-secret=x"}, "shared-store-secret"},
		{"an alert duration Prometheus cannot read", []string{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.storeDownFor=5min"}, "storeDownFor"},
		{"two CA bundle sources", []string{"--set", "caBundle.configMap=a", "--set", "caBundle.secret=b"}, "not both"},
		{"admin API on the pod IP", []string{"--set", "config.admin-listen=:8081"}, "admin-listen"},
		{"the token in the ConfigMap", []string{"--set", "config.upstream-token=hf_x"}, "upstream-token"},
		{"ServiceMonitor in sidecar mode", append([]string{"--set", "serviceMonitor.enabled=true"}, sidecarWorkload...), "use podMonitor"},
		{"two monitors for one target", []string{"--set", "serviceMonitor.enabled=true", "--set", "podMonitor.enabled=true"}, "enable one"},
		{"sidecar mode without a workload", []string{"--set", "mode=sidecar"}, "sidecar.workload.containers"},
		{"the old example's values", append([]string{"--set", "sidecar.inference.gpus=1"}, sidecarWorkload...), "inference"},
		{"a pod field the chart owns", append([]string{"--set", "sidecar.workload.podSpec.nodeSelector.a=b"}, sidecarWorkload...), "podSpec.nodeSelector"},
		{"injecting into a container that is not there", append([]string{"--set", "sidecar.workload.inject[0]=ap"}, sidecarWorkload...), `"ap"`},
		{"a workload that sets HF_ENDPOINT itself", append([]string{"--set", "sidecar.workload.containers[0].env[0].name=HF_ENDPOINT",
			"--set", "sidecar.workload.containers[0].env[0].value=https://huggingface.co"}, sidecarWorkload...), "sets HF_ENDPOINT itself"},
		{"a workload port named http", append([]string{"--set", "sidecar.workload.containers[0].ports[0].name=http",
			"--set", "sidecar.workload.containers[0].ports[0].containerPort=80"}, sidecarWorkload...), `port "http"`},
		{"a workload field the chart owns", append([]string{"--set", "sidecar.workload.spec.replicas=3"}, sidecarWorkload...), "spec.replicas"},
		{"the cache mounted in the workload without a common group", append([]string{"--set", "sidecar.cache.workloadMountPath=/hub",
			"--set", "sidecar.podSecurityContext.fsGroup=null"}, sidecarWorkload...), "fsGroup"},
		{"a StatefulSet without its Service", append([]string{"--set", "sidecar.workload.kind=StatefulSet"}, sidecarWorkload...), "serviceName"},
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
