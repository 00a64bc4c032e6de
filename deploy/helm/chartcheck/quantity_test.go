package chartcheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hubproxy/hubproxy/internal/bytesize"
)

// schemaProperty returns the schema of the value at a dotted path of
// values.schema.json.
func schemaProperty(t *testing.T, dotted string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatal(err)
	}
	for _, key := range strings.Split(dotted, ".") {
		props, _ := node["properties"].(map[string]any)
		next, ok := props[key].(map[string]any)
		if !ok {
			t.Fatalf("values.schema.json has no %s", dotted)
		}
		node = next
	}
	return node
}

// schemaPattern compiles the pattern the schema gives a string value.
func schemaPattern(t *testing.T, dotted string) *regexp.Regexp {
	t.Helper()
	p, ok := schemaProperty(t, dotted)["pattern"].(string)
	if !ok {
		t.Fatalf("values.schema.json: %s has no pattern", dotted)
	}
	return regexp.MustCompile(p)
}

// quantitySamples are strings the Kubernetes quantity parser accepts or
// refuses, including the IEC spellings hubproxy's own sizes use.
var quantitySamples = []string{
	"110Gi", "1Gi", "0.5Gi", "1.5Ti", "500M", "500Mi", "2k", "1e9", "1E3", "129e6", "100", "0", "1073741824", "100m", "+1Gi", "1Ei", "1P",
	"100GiB", "1.5GB", "10 Gi", "1KiB", "1K", "-1Gi", "Gi", "1e", "1.2.3Gi", "0x10", "1gi", "1 ", " 1",
}

// kubernetesSizes are quantities as people write sizes; the schema takes them.
var kubernetesSizes = []string{"110Gi", "0.5Gi", "1.5Ti", "500M", "500Mi", "2k", "1e9", "1073741824", "0"}

// TestQuantityFieldsAreKubernetesQuantities holds the schema of every value
// the chart renders into a Kubernetes quantity to the API server's own
// parser: "100GiB" renders a claim the API server refuses at apply time,
// after the release is half installed.
func TestQuantityFieldsAreKubernetesQuantities(t *testing.T) {
	for _, field := range []struct {
		path       string
		emptyMeans string // "" when an empty value is not allowed
	}{
		{"persistence.size", ""},
		{"persistence.emptyDirSizeLimit", "no limit"},
		{"tmpSizeLimit", "no limit"},
		{"sidecar.cache.sizeLimit", "no limit"},
	} {
		re := schemaPattern(t, field.path)
		for _, s := range quantitySamples {
			if !re.MatchString(s) {
				continue
			}
			if q, err := resource.ParseQuantity(s); err != nil || q.Sign() < 0 {
				t.Errorf("%s: schema accepts %q, which is not a non-negative Kubernetes quantity (%v)", field.path, s, err)
			}
		}
		for _, s := range kubernetesSizes {
			if !re.MatchString(s) {
				t.Errorf("%s: schema refuses %q, a valid Kubernetes quantity", field.path, s)
			}
		}
		if got := re.MatchString(""); got != (field.emptyMeans != "") {
			t.Errorf("%s: schema accepts \"\" = %v, want %v", field.path, got, field.emptyMeans != "")
		}
	}
}

// TestConfigSizesAreWhatHubproxyReads holds the schema of the config's size
// keys to the binary's own parser: whatever the schema lets through, hubproxy
// must read (else the pod crash-loops on a value helm accepted), and both the
// IEC (100GiB) and the Kubernetes (100Gi) spellings get through.
func TestConfigSizesAreWhatHubproxyReads(t *testing.T) {
	mustAccept := []string{"100GiB", "100Gi", "10G", "10GB", "64KiB", "64Ki", "8MiB", "1.5GB", "1048576", "0", "2k"}
	for _, key := range []string{"cache-max-bytes", "cache-min-free-bytes", "block-size", "chunk-size", "tensor-header-cache-bytes", "gpu-device-budget-bytes"} {
		re := schemaPattern(t, "config."+key)
		for _, s := range append(append([]string(nil), quantitySamples...), mustAccept...) {
			if !re.MatchString(s) {
				continue
			}
			if _, err := bytesize.Parse(s); err != nil {
				t.Errorf("config.%s: schema accepts %q, hubproxy refuses it: %v", key, s, err)
			}
		}
		for _, s := range mustAccept {
			if !re.MatchString(s) {
				t.Errorf("config.%s: schema refuses %q, which hubproxy reads", key, s)
			}
		}
	}
}
