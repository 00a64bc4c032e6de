// Package soak runs hubproxy under a long stretch of hostile traffic and
// checks every answer against an oracle: `make soak` (10 minutes by default)
// and the 2-minute variant `make test` runs. Each trust property has its own
// focused test elsewhere; this is where they meet: a kill during an eviction
// while a gated caller's decision expires and the CDN truncates a body.
//
// # What runs
//
//   - The fake hub (internal/hubtest) in process, one per proxy (the same
//     repos and the same history, so every upstream byte and every fault is
//     attributed to one proxy), behind TCP relays for its hub and CDN
//     servers that the chaos can refuse or blackhole to make upstream
//     unreachable. Every fault kind is re-armed at random every half second,
//     with per-connection bandwidth caps and latency.
//   - Real hubproxy processes (the binary from `go build`): a steady one that
//     is never killed (its resources are checked for leaks over the whole
//     run) and two crashy ones that are killed with SIGKILL and restarted.
//     Each caches on its own small tmpfs under a budget far below the working
//     set, so eviction runs all the time; the chaos fills that tmpfs to the
//     brim now and then.
//   - One real shared store for all of them (store.go): a MinIO process, the
//     binary `make minio` builds for `make test`, on a data directory that
//     outlives it, behind a relay. The proxies share chunks through it (so
//     one fetches what the others then read, and a killed one's claims are
//     taken over by the other two); the chaos kills it with SIGKILL and
//     restarts it on its data, cuts it off (refused or blackholed), and
//     tampers with a stored chunk (same size, other bytes), either through
//     the S3 API or in MinIO's files on disk. -no-store runs without it.
//   - Concurrent clients (workload.go) sending whole downloads, ranges, HEADs,
//     missing files, tensors, tensor-parallel shards (contiguous and column),
//     subset safetensors files, tensor listings, repo info and trees, as
//     anonymous, granted, revoked and never-approved callers, on public,
//     gated, private and flipping repos and on a branch that gets new commits.
//
// # The oracle
//
// history.go records the hub's state (who may read what, where each branch
// points) as a timeline. A response is right if it is what the hub would
// have answered that caller at some moment of its window: from the request's
// start minus access-ttl (the documented time a decision is reused) minus a
// fixed lateness for the hub's answer to reach the proxy, to the response's
// headers. Bytes are compared with the hub's own content by sha256 (whole
// files) or by offset (ranges, tensors, shards, subsets). 5xx answers and
// broken connections are availability failures, counted but tolerated during
// the chaos; after it, a quiet phase demands that everything works again.
//
// # Upstream bytes (ledger.go, cluster.go)
//
// ledger.go counts, per 64 KiB block of every blob, the bytes the hub sent
// in complete answers (the only ones a proxy can have stored). A block may
// be fetched once per life of its blob in the cache (one more per eviction,
// failed promotion, and kill that found it partial); anything beyond must be
// explained by answers cut in flight, fills that failed for want of space,
// answers a fault spoiled, column-shard reads (around the cache by design)
// and reads that overlapped a full disk. The quiet phase adds an exact
// check: eight readers of a fresh file cost one fill, a warm read none.
//
// With the store, the proxies' hubs still answer one proxy each (the same
// content, so the same etags, which is what the store is keyed by), so
// every upstream byte is still one proxy's, and the per-proxy bound still
// holds; the store's events each proxy logs (a claim taken over, a wrong
// object dropped, a file dropped after failing verification, the stretches
// it served around the store) join the terms that explain refetches. On top,
// the cluster bound (cluster.go): per block, complete answers summed over
// every proxy's hub, once per cluster life of the blob, which local
// evictions do not end (the store still has it): one upstream fetch per
// chunk across the cluster.
//
// # The store, after the run (coldnode.go)
//
// A fourth proxy starts on an empty disk and reads every file the hub ever
// had, whole, through the store: every chunk the store held with the hub's
// bytes must come from the store (no upstream byte of it), chunks it held
// wrong must be caught and repaired, never served. Once every proxy has
// stopped, the store is scanned, read independently of hubproxy's code:
// every chunk holds the hub's bytes for its etag (and a matching digest),
// every tampered chunk was repaired, and no claim is left but by a proxy
// killed with SIGKILL (a clean stop releases them; a dead node's are what
// the lease is for). The report gives the store's figures: restarts,
// outages, tampers, claims won, waited and taken over (each proxy's
// /metrics, banked before every kill), bytes read and written.
//
// A failing run prints its seed and the events that led to the failure; the
// chaos schedule is a pure function of the seed (schedule.go), so the same
// seed replays the same schedule.
package soak
