package chartcheck

import (
	"errors"
	"strings"
	"testing"
)

// validFixture is a small, correct Deployment; the cases below break it one
// field at a time.
const validFixture = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: fixture
spec:
  replicas: 1
  selector:
    matchLabels: {app: fixture}
  template:
    metadata:
      labels: {app: fixture}
    spec:
      containers:
        - name: hubproxy
          image: hubproxy:test
          securityContext:
            runAsNonRoot: true
            readOnlyRootFilesystem: true
`

const validServiceMonitor = `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: fixture
spec:
  selector:
    matchLabels: {app: fixture}
  endpoints:
    - port: http
      path: /metrics
`

// TestStrictDecoding proves the decoder behind TestChart rejects what the API
// server would drop or refuse: a check that accepted typos would pass any chart.
func TestStrictDecoding(t *testing.T) {
	for _, fixture := range []string{validFixture, validServiceMonitor} {
		if _, err := decodeStrict([]byte(fixture)); err != nil {
			t.Fatalf("valid fixture rejected: %v\n%s", err, fixture)
		}
	}
	for _, tc := range []struct {
		name, doc string
		want      error
		mention   string
	}{
		{"misspelt field", strings.Replace(validFixture, "runAsNonRoot", "runAsNonRot", 1), errStrict, "runAsNonRot"},
		{"field at the wrong level", strings.Replace(validFixture, "  replicas: 1", "  replicas: 1\n  readOnlyRootFilesystem: true", 1), errStrict, "readOnlyRootFilesystem"},
		{"wrong type", strings.Replace(validFixture, "replicas: 1", `replicas: "one"`, 1), errStrict, "replicas"},
		{"duplicate key", strings.Replace(validFixture, "  replicas: 1", "  replicas: 1\n  replicas: 2", 1), errStrict, "replicas"},
		{"ServiceMonitor typo", strings.Replace(validServiceMonitor, "path:", "pathh:", 1), errStrict, "pathh"},
		{"old apiVersion", strings.Replace(validFixture, "apps/v1", "extensions/v1beta1", 1), errAPIVersion, "extensions/v1beta1"},
		{"kind the chart never renders", strings.Replace(validFixture, "kind: Deployment", "kind: DaemonSet", 1), errUnknownKind, "DaemonSet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeStrict([]byte(tc.doc))
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			var de *decodeError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name %q", err, tc.mention)
			}
		})
	}
}

// TestSplitDocuments checks the stream splitter on helm's output shape.
func TestSplitDocuments(t *testing.T) {
	stream := "---\n# Source: a.yaml\nkind: A\n---\n# Source: only-comments.yaml\n# nothing\n---\nkind: B\nx: |\n  ---not a separator\n"
	docs, err := splitDocuments([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || !strings.Contains(string(docs[0]), "kind: A") || !strings.Contains(string(docs[1]), "---not a separator") {
		t.Errorf("docs = %q", docs)
	}
	if _, err := splitDocuments([]byte("---\n# empty\n")); !errors.Is(err, errEmptyRendering) {
		t.Errorf("empty stream: error = %v, want errEmptyRendering", err)
	}
}
