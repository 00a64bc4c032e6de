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
//     missing files and branches, tensors, tensor-parallel shards (contiguous
//     and column), subset safetensors files, tensor listings, repo info (and
//     its expand= projections), trees and paths-info, as anonymous, granted,
//     revoked and never-approved callers, on public, gated, private and
//     flipping repos and on a branch that gets new commits.
//   - After the chaos, the shared tier under a real cluster's conditions
//     (phases.go), each on cold files of its own that nothing else reads. A
//     slow owner: one proxy's upstream at 20 KiB/s per connection (one of
//     the soak's 256 KiB chunks in 12.8 s, past a client's 10 s read
//     timeout) while it owns chunks of a file that two clients of each
//     other proxy read meanwhile; no client of a waiting node may go longer than 6 s without
//     a byte, the first included (gaps.go measures each answer's first
//     byte and longest gap; the waiting nodes read around the owner after
//     sharedfill's 3 s FallbackAfter, huggingface_hub gives up after 10 s).
//     A small disk: one proxy reads a 200 MiB file whole, then a node whose
//     tmpfs is 64 MiB reads it whole and in ranges: its cache cannot hold
//     it, so its reads bypass the cache, and they must come from the
//     store: no upstream byte of any chunk the store held, none at all
//     when it held the whole file.
//   - An attacker (attack.go): around every outage and every error storm
//     (the hub answering 503 or 429 to everything), callers the gated repos
//     refuse read their metadata, which the Hub lets anyone read, and then
//     ask for their files; and pass-through POSTs that upstream answers 500,
//     to open hubproxy's upstream breaker for everyone (the quiet phase
//     checks that a public file no proxy has seen is served right after).
//
// # The oracle
//
// history.go records the hub's state (who may read what, where each branch
// points) as a timeline, with the Hub's access rules (docs/hub-protocol.md
// §9): a gated repo's metadata is public, its files are not; a private repo
// is RepoNotFound to strangers on every route; the repo is checked before
// the revision and the path, so a refused caller learns neither, and no
// refusal or outage answer to it may carry a size, an etag or a commit. A
// response is right if it is what the hub would have answered that caller
// at some moment of its window: from the request's
// start minus access-ttl (the documented time a decision is reused) minus a
// fixed lateness for the hub's answer to reach the proxy, to the response's
// headers. Bytes are compared with the hub's own content by sha256 (whole
// files) or by offset (ranges, tensors, shards, subsets). 5xx answers and
// broken connections are availability failures, counted but tolerated during
// the chaos; after it, a quiet phase demands that everything works again.
//
// # Upstream bytes (ledger.go, credits.go, cluster.go)
//
// ledger.go keeps every complete answer the hub sent (the only ones a proxy
// can have stored) and counts, per 64 KiB block of every blob, the bytes of
// it they carried. A block may come from upstream once; every further fetch
// must be explained by an event that touched that very block, and each
// event explains at most one more fetch of each block it touched (never a
// file's worth of bytes any block may spend: credits.go). The events: an
// eviction, a failed promotion or a kill that found the blob partial (the
// blocks fetched in the life it ended), an answer cut in flight (the blocks
// its Range asked for), a fill that failed for want of space (the blocks it
// had not written), an answer a fault spoiled, a column shard (read around
// the cache by design: its tensor's blocks), a read that overlapped a full
// disk or a change of access (the blocks it asked for). The quiet phase
// adds an exact check: eight readers of a fresh file cost one fill, a warm
// read none.
//
// With the store, the proxies' hubs still answer one proxy each (the same
// content, so the same etags, which is what the store is keyed by), so
// every upstream byte is still one proxy's, and the per-proxy bound still
// holds; the store's events each proxy logs (a claim taken over, a wrong
// object dropped, a file dropped after failing verification, a reader that
// read its bytes of a chunk around a slow owner, the stretches it served
// around the store) join the terms that explain refetches. On top,
// the cluster bound (cluster.go): per block, complete answers summed over
// every proxy's hub, once per cluster life of the blob, which local
// evictions do not end (the store still has it): one upstream fetch per
// chunk across the cluster.
//
// # The store, after the run (coldnode.go)
//
// A cold proxy starts on an empty disk and reads every file the hub ever
// had (but the phases' own), whole, through the store: every chunk the store held with the hub's
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
