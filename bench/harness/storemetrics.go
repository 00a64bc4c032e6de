package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// storeTotals is the shared-store traffic of a set of nodes, summed from
// their hubproxy_store_* counters.
type storeTotals struct {
	read, written          float64 // object bytes
	won, waited, takenOver float64 // chunk claims, by how they ended
}

// The series storeStats adds up, as hubproxy's /metrics names them.
const (
	seriesStoreRead    = `hubproxy_store_bytes_total{direction="read"}`
	seriesStoreWritten = `hubproxy_store_bytes_total{direction="written"}`
	seriesClaimWon     = `hubproxy_store_claims_total{result="won"}`
	seriesClaimWaited  = `hubproxy_store_claims_total{result="waited"}`
	seriesClaimTaken   = `hubproxy_store_claims_total{result="taken_over"}`
)

// storeStats scrapes every node's /metrics and sums its store counters.
// The nodes started with empty counters, so the sums are this run's. A node
// that exports no store bytes series has no store: an error, since only
// nodes given one are asked.
func storeStats(ctx context.Context, nodes []*server) (storeTotals, error) {
	var t storeTotals
	c := newClient(1)
	defer c.CloseIdleConnections()
	for _, nd := range nodes {
		v, err := scrapeSeries(ctx, c, nd.baseURL()+"/metrics")
		if err != nil {
			return t, err
		}
		if _, ok := v[seriesStoreRead]; !ok {
			return t, fmt.Errorf("harness: %s exports no %s: is its shared store configured?", nd.name(), seriesStoreRead)
		}
		t.read += v[seriesStoreRead]
		t.written += v[seriesStoreWritten]
		t.won += v[seriesClaimWon]
		t.waited += v[seriesClaimWaited]
		t.takenOver += v[seriesClaimTaken]
	}
	return t, nil
}

// scrapeSeries reads the hubproxy_store_* samples of a Prometheus text
// exposition into series → value, the series written as on its line (name
// and labels).
func scrapeSeries(ctx context.Context, c *http.Client, url string) (map[string]float64, error) {
	resp, err := get(ctx, c, url, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "hubproxy_store_") {
			continue
		}
		// These series' label values (operations, results, directions)
		// hold no spaces, and client_golang writes no timestamps: the one
		// space left separates the series from its value.
		series, value, ok := strings.Cut(line, " ")
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("harness: %s: bad sample line %q", url, line)
		}
		out[series] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("harness: %s: %w", url, err)
	}
	return out, nil
}
