// Package cachemaint is the offline maintenance of a cache directory
// (hubproxy cache ls|du|verify|prune|pin), apart from the online cache
// (internal/cache) whose tree it works on. These functions work on the tree
// alone: no Store need be open, and any HF_HUB_CACHE (with or without
// hubproxy's .hubproxy/) can be inspected. The file names and formats are
// internal/cache's (cache.Layout); this package only walks and edits them.
//
// Running them next to a live server is safe in the sense that nothing it
// serves can become wrong: a reader holding a deleted blob keeps reading the
// unlinked file, and the Store refetches a blob that vanished behind its back.
// But a partial deleted while it is being filled makes that fill fail once,
// and the server's byte accounting stays stale until it restarts; so Prune
// leaves partials touched within StaleAfter alone, and callers should prefer
// to prune a cache no server is using.
package cachemaint
