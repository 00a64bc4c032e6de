package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func testCluster() *Cluster {
	return &Cluster{Nodes: 8, Clients: 4, Size: 2 * GiB, Measures: []Measure{
		{Scenario: 10, Title: "c", Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Headline: true,
			Samples: map[string][]float64{TierS3: {1, 1.01}, TierFile: {1}, TierNone: {8}, TierPod: {1}}},
		{Scenario: 10, Title: "c", Metric: "time to the last client done", Unit: "s", Better: Lower, Headline: true,
			Samples: map[string][]float64{TierS3: {10}, TierFile: {8}, TierNone: {20}, TierPod: {5}}},
		{Scenario: 10, Title: "c", Metric: "store bytes written", Unit: "MiB", Better: Lower, Note: "each chunk once",
			Samples: map[string][]float64{TierS3: {2048}, TierFile: {2048}}},
		{Scenario: 10, Title: "c", Metric: "store bytes read", Unit: "MiB", Better: Lower,
			Samples: map[string][]float64{TierS3: {14336}, TierFile: {14336}}},
	}}
}

func TestClusterMarkdown(t *testing.T) {
	r := testReport()
	r.Cluster = testCluster()
	md := r.Markdown()
	for _, want := range []string{
		"## Cluster: 8 nodes × 4 clients on one cold file (scenario 10; median (min–max))",
		"| Metric | Unit | MinIO store | file:// store | no store | one shared pod | Note |",
		"| upstream bytes / file size | x | 1.005 (1.000–1.010) | 1.000 | 8.000 | 1.000 |  |",
		"| store bytes written | MiB | 2048 | 2048 | — | — | each chunk once; over the file: MinIO store 1.000×, file:// store 1.000× |",
		"| store bytes read | MiB | 14336 | 14336 | — | — | over the file: MinIO store 7.000×, file:// store 7.000× |",
		"| Metric | Better | MinIO store / no store | file:// store / no store | MinIO store / one shared pod | file:// store / one shared pod |",
		"| upstream bytes / file size (x) | lower | 0.126 (MinIO store) | 0.125 (file:// store) | 1.005 (tie) | 1.000 (tie) |",
		"| time to the last client done (s) | lower | 0.500 (MinIO store) | 0.400 (file:// store) | 2.000 (one shared pod) | 1.600 (one shared pod) |",
		"Cluster, 8 nodes × 4 clients on a cold 2 GiB file: upstream 1.005× the file with a MinIO store, 1.000× with a file:// store, 8.000× without a store, 1.000× through one shared pod; the last client was done in 10.00 s with MinIO (0.500× the no-store time, 2.000× the one-pod time) and 8.000 s with file:// (0.400×, 1.600×).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| store bytes read (MiB) |") {
		t.Error("store traffic, which only store tiers have, has a ratio row")
	}
	if i, j := strings.Index(md, "## Cluster"), strings.Index(md, "## Headline"); i < 0 || j < i {
		t.Error("the cluster section is not before the headline")
	}
}

func TestStoreStats(t *testing.T) {
	exposition := func(read, written, won string) string {
		return "# HELP hubproxy_store_bytes_total Object bytes.\n# TYPE hubproxy_store_bytes_total counter\n" +
			`hubproxy_store_bytes_total{direction="read"} ` + read + "\n" +
			`hubproxy_store_bytes_total{direction="written"} ` + written + "\n" +
			`hubproxy_store_claims_total{result="won"} ` + won + "\n" +
			`hubproxy_store_claims_total{result="waited"} 2` + "\n" +
			`hubproxy_store_claims_total{result="taken_over"} 0` + "\n" +
			`hubproxy_http_requests_total{route="/a b",code="200"} 5` + "\n"
	}
	var nodes []*server
	for _, body := range []string{exposition("1.048576e+06", "0", "0"), exposition("2", "3145728", "3")} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
		defer srv.Close()
		nodes = append(nodes, &server{label: "n", url: srv.URL})
	}
	got, err := storeStats(context.Background(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	if want := (storeTotals{read: 1048578, written: 3145728, won: 3, waited: 4}); got != want {
		t.Errorf("storeStats = %+v, want %+v", got, want)
	}

	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hubproxy_upstream_up 1\n"))
	}))
	defer bare.Close()
	if _, err := storeStats(context.Background(), []*server{{label: "bare", url: bare.URL}}); err == nil || !strings.Contains(err.Error(), "shared store") {
		t.Errorf("a node without a store: err %v", err)
	}
}
