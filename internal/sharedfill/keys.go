package sharedfill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// Key layout, under the store URL's prefix:
//
//	v4/<shard>/chunks/<etag>/<chunk size>/<index>
//	v4/<shard>/claims/<etag>/<chunk size>/<index>/<gen>
//	v4/clock
//
// v4 is the layout version: a change that old nodes would misread gets a
// new one. Nodes of different layouts share nothing; the objects of older
// ones are never read, and Prune deletes them (oldLayouts). v1 chunk
// objects had no digest, v2 ones an unkeyed sha256, which anyone who could
// write the store could forge; v3 kept a file's chunks under one key prefix.
//
// The shard (two hex digits of a hash of the chunk's etag, chunk size and
// index) comes first because an object store's request limits hold per key
// prefix (S3: about 5,500 GET and 3,500 PUT per second each), and a
// cluster starting a model reads each new file's chunks all at once: under
// one prefix per file, every node's GETs of a hot file met one limit (from
// 64 nodes on, in bench/clustersim), while spread over 256 prefixes they
// meet 256, which S3 has already split for earlier models. A chunk's claim
// lives in the chunk's shard, so its polls spread the same way. The cost is
// that what belongs to one file is no longer under one prefix: Forget lists
// every shard (deleteFile), which it does only when a file failed to verify.
const (
	layoutPrefix = "v4/"
	shardCount   = 256
)

// Kinds of object in the layout.
const (
	kindChunk = "chunks"
	kindClaim = "claims"
)

// chunkID names one chunk: a file's content hash and an index in units of
// the Sharer's chunk size.
type chunkID struct {
	etag  string
	index int64
}

// shardOf is the shard of chunk index of etag at chunkSize.
func shardOf(etag string, chunkSize, index int64) string {
	h := sha256.Sum256([]byte(etag + "/" + strconv.FormatInt(chunkSize, 10) + "/" + strconv.FormatInt(index, 10)))
	return hex.EncodeToString(h[:1])
}

func objectKey(kind string, c chunkID, chunkSize int64) string {
	return layoutPrefix + shardOf(c.etag, chunkSize, c.index) + "/" + kind + "/" + c.etag + "/" +
		strconv.FormatInt(chunkSize, 10) + "/" + strconv.FormatInt(c.index, 10)
}

func (s *Sharer) chunkKey(c chunkID) string { return objectKey(kindChunk, c, s.opts.ChunkSize) }

func (s *Sharer) claimKey(c chunkID, gen int) string {
	return objectKey(kindClaim, c, s.opts.ChunkSize) + "/" + strconv.Itoa(gen)
}

// ChunkKey is the key, under the store's prefix, of chunk index of the file
// with content hash etag, shared at chunkSize: for tools and tests that
// look at the store from outside.
func ChunkKey(etag string, chunkSize, index int64) string {
	return objectKey(kindChunk, chunkID{etag, index}, chunkSize)
}

// storedKey is a key of the layout, parsed.
type storedKey struct {
	kind string // kindChunk or kindClaim
	etag string
}

// parseKey parses a key of the layout; ok is false for anything else (the
// clock, foreign objects).
func parseKey(key string) (k storedKey, ok bool) {
	rest, ok := strings.CutPrefix(key, layoutPrefix)
	if !ok {
		return k, false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 5 && parts[1] == kindChunk, len(parts) == 6 && parts[1] == kindClaim:
	default:
		return k, false
	}
	if len(parts[0]) != 2 || parts[2] == "" {
		return k, false
	}
	return storedKey{kind: parts[1], etag: parts[2]}, true
}

// IsClaimKey says whether key (under the store's prefix) is a chunk claim.
func IsClaimKey(key string) bool { return isKind(key, kindClaim) }

// isKind says whether key is an object of kind in the layout.
func isKind(key, kind string) bool {
	k, ok := parseKey(key)
	return ok && k.kind == kind
}

// shardPrefixes are the prefixes of every shard, for listing what the
// layout holds of one file: kind's objects of etag in each.
func shardPrefixes(kind, etag string) []string {
	ps := make([]string, shardCount)
	for i := range ps {
		ps[i] = layoutPrefix + hex.EncodeToString([]byte{byte(i)}) + "/" + kind + "/" + etag + "/"
	}
	return ps
}

// deleteFile deletes the chunks of the file with content hash etag, of
// every chunk size, and with claims its claims too, listing each shard (a
// few at a time). It returns how many objects it deleted, and their bytes.
func deleteFile(ctx context.Context, store Lister, etag string, claims bool) (int, int64, error) {
	prefixes := shardPrefixes(kindChunk, etag)
	if claims {
		prefixes = append(prefixes, shardPrefixes(kindClaim, etag)...)
	}
	const parallel = 8
	var (
		mu    sync.Mutex
		n     int
		bytes int64
		errs  []error
		wg    sync.WaitGroup
		next  = make(chan string)
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				m, b, err := deletePrefix(ctx, store, p, nil)
				mu.Lock()
				n, bytes = n+m, bytes+b
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
feed:
	for _, p := range prefixes {
		select {
		case next <- p:
		case <-ctx.Done():
			mu.Lock()
			errs = append(errs, context.Cause(ctx))
			mu.Unlock()
			break feed
		}
	}
	close(next)
	wg.Wait()
	return n, bytes, errors.Join(errs...)
}
