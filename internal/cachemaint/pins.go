package cachemaint

import (
	"slices"

	"github.com/hubproxy/hubproxy/internal/cache"
)

// The pins recorded in a cache directory (hubproxy cache pin|unpin): the
// file and its format are internal/cache's (cache.ReadPins, cache.WritePins),
// as a running Store reads it at each eviction.

// AddPin records p in the cache directory; it reports false if it was
// already there. A running server picks it up at its next eviction.
func AddPin(dir string, p cache.Pin) (bool, error) {
	pins, err := cache.ReadPins(dir)
	if err != nil {
		return false, err
	}
	if slices.Contains(pins, p) {
		return false, nil
	}
	return true, cache.WritePins(dir, append(pins, p))
}

// RemovePin removes p from the cache directory's pins; it reports false if
// it was not there.
func RemovePin(dir string, p cache.Pin) (bool, error) {
	pins, err := cache.ReadPins(dir)
	if err != nil {
		return false, err
	}
	i := slices.Index(pins, p)
	if i < 0 {
		return false, nil
	}
	return true, cache.WritePins(dir, slices.Delete(pins, i, i+1))
}

// PinnedETags returns the content hashes of the files that pins, and the
// pins recorded in the cache directory, cover there: for pruning the shared
// store (keyed by content hash) without touching them. Only files this
// cache holds are known, so it also returns the pins that cover none of
// them: what they were meant to keep cannot be told here.
func PinnedETags(dir string, pins []cache.Pin) (etags map[string]bool, unresolved []cache.Pin, err error) {
	if err := cache.NewLayout(dir).CheckVersion(); err != nil {
		return nil, nil, err
	}
	filePins, err := cache.ReadPins(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	etags = map[string]bool{}
	for _, p := range append(slices.Clone(pins), filePins...) {
		x := cache.ResolvePins(dir, []cache.Pin{p})
		found := false
		for _, e := range entries {
			if x.Covers(e.Repo, e.ETag) {
				etags[e.ETag], found = true, true
			}
		}
		if !found {
			unresolved = append(unresolved, p)
		}
	}
	return etags, unresolved, nil
}
