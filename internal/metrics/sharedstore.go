package metrics

import "github.com/prometheus/client_golang/prometheus"

// Shared-store label values: operations, their results, and claim outcomes.
var (
	StoreOps     = []string{"get", "create", "put", "stat", "list", "delete"}
	StoreResults = []string{"ok", "not_found", "exists", "error"}
	ClaimResults = []string{"won", "waited", "taken_over"}
	// RejectReasons are why chunk objects read from the store were
	// rejected (sharedfill.Reject*).
	RejectReasons = []string{"mac", "other_secret", "size", "unreadable"}
	// ChunkLookups are how chunks wanted from the store were got
	// (sharedfill.Verified*).
	ChunkLookups = []string{"hit", "joined", "miss"}
)

// SharedStore counts a node's traffic with the cluster's shared store
// (shared-store): requests by operation and result, bytes each way,
// failures, and how each chunk's claim ended.
type SharedStore struct {
	requests *prometheus.CounterVec // op, result
	bytes    *prometheus.CounterVec // direction: read, written
	errors   *prometheus.CounterVec // op
	claims   *prometheus.CounterVec // result
	rejected *prometheus.CounterVec // reason
	lookups  *prometheus.CounterVec // result
}

// RegisterSharedStore registers the shared-store metrics, and
// hubproxy_store_up read from up at each scrape.
func RegisterSharedStore(reg prometheus.Registerer, up func() bool) *SharedStore {
	m := &SharedStore{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_requests_total",
			Help: "Requests to the shared store, by operation (get, create, put, stat, list, delete) and result (ok, not_found, exists, error).",
		}, []string{"op", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_bytes_total",
			Help: "Object bytes read from (direction=read) and written to (written) the shared store.",
		}, []string{"direction"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_errors_total",
			Help: "Shared-store requests that failed (unreachable, refused, too slow), by operation; reads fell back to upstream.",
		}, []string{"op"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_claims_total",
			Help: "Chunks missing from the shared store, by how this node got them: won (fetched it from upstream for the cluster), waited (another node did), taken_over (its owner went silent).",
		}, []string{"result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_chunks_rejected_total",
			Help: "Chunk objects read from the shared store that were not served but deleted and fetched anew, by reason: mac (forged, copied or corrupt), other_secret (sealed under another shared-store secret: this node's or theirs is wrong), size, unreadable.",
		}, []string{"reason"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_chunk_lookups_total",
			Help: "Chunks a fill wanted from the shared store, by how they were got: hit (kept in memory, verified), joined (shared another reader's store read), miss (read from the store).",
		}, []string{"result"}),
	}
	for _, op := range StoreOps {
		for _, r := range StoreResults {
			m.requests.WithLabelValues(op, r)
		}
		m.errors.WithLabelValues(op)
	}
	m.bytes.WithLabelValues("read")
	m.bytes.WithLabelValues("written")
	for _, r := range ClaimResults {
		m.claims.WithLabelValues(r)
	}
	for _, r := range RejectReasons {
		m.rejected.WithLabelValues(r)
	}
	for _, r := range ChunkLookups {
		m.lookups.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.bytes, m.errors, m.claims, m.rejected, m.lookups,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "store_up",
			Help: "1 while the shared store answers, 0 while this node serves around it from upstream."},
			func() float64 {
				if up() {
					return 1
				}
				return 0
			}))
	return m
}

// ObserveOp counts one store request: its operation, result and the object
// bytes it moved (read for get, written for create and put).
func (m *SharedStore) ObserveOp(op, result string, bytes int64) {
	m.requests.WithLabelValues(op, result).Inc()
	if result == "error" {
		m.errors.WithLabelValues(op).Inc()
	}
	if bytes > 0 {
		dir := "written"
		if op == "get" {
			dir = "read"
		}
		m.bytes.WithLabelValues(dir).Add(float64(bytes))
	}
}

// ObserveClaim counts how one chunk's claim ended.
func (m *SharedStore) ObserveClaim(result string) { m.claims.WithLabelValues(result).Inc() }

// ObserveReject counts one chunk object rejected, and why.
func (m *SharedStore) ObserveReject(reason string) { m.rejected.WithLabelValues(reason).Inc() }

// ObserveChunkLookup counts how one chunk wanted from the store was got.
func (m *SharedStore) ObserveChunkLookup(result string) { m.lookups.WithLabelValues(result).Inc() }
