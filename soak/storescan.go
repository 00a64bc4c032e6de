package soak

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The store's layout as hubproxy writes it (internal/sharedfill), read here
// independently of hubproxy's own code, so that the scan is an oracle and
// not hubproxy checking itself: chunk objects (the chunk's bytes, then the
// id of the secret that sealed them and their HMAC, see payloadOf) at
// <prefix>/<layout>/<shard>/chunks/<etag>/<chunk size>/<index>, claims at
// <prefix>/<layout>/<shard>/claims/<etag>/<chunk size>/<index>/<generation>,
// where shard is the first byte, in hex, of sha256("<etag>/<chunk size>/<index>").
const storeLayout = "v4"

// chunkSecret is the proxies' shared-store secret (their environment has
// it, as HUBPROXY_SHARED_STORE_SECRET), with which the scan checks seals.
const chunkSecret = "hubproxysoak-chunk-seal-secret-0123456789abcdef"

var (
	layoutKeyPrefix = storePrefix + "/" + storeLayout + "/"
	storeClockKey   = layoutKeyPrefix + "clock"
)

// chunkRef names one stored chunk.
type chunkRef struct {
	key          string
	etag         string
	size, index  int64 // the chunk size it was shared by, and its index
	objSize      int64
	lastModified time.Time
}

// storeKey is a chunk's or a claim's key, parsed.
type storeKey struct {
	kind        string // "chunks" or "claims"
	etag        string
	size, index int64
}

// parseLayoutKey parses a key of the layout without the store's prefix
// ("v4/<shard>/chunks/..."), as the proxies log them, and checks that the
// shard is the one the chunk hashes to.
func parseLayoutKey(key string) (storeKey, bool) {
	rest, ok := strings.CutPrefix(key, storeLayout+"/")
	if !ok {
		return storeKey{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 5 || (parts[1] != "chunks" || len(parts) != 5) && (parts[1] != "claims" || len(parts) != 6) {
		return storeKey{}, false
	}
	size, err1 := strconv.ParseInt(parts[3], 10, 64)
	idx, err2 := strconv.ParseInt(parts[4], 10, 64)
	if err1 != nil || err2 != nil || size <= 0 || idx < 0 || parts[2] == "" {
		return storeKey{}, false
	}
	h := sha256.Sum256([]byte(parts[2] + "/" + parts[3] + "/" + parts[4]))
	if parts[0] != hex.EncodeToString(h[:1]) {
		return storeKey{}, false
	}
	return storeKey{kind: parts[1], etag: parts[2], size: size, index: idx}, true
}

// parseStoreKey parses a key as the store lists it (under the proxies'
// prefix).
func parseStoreKey(key string) (storeKey, bool) {
	rest, ok := strings.CutPrefix(key, storePrefix+"/")
	if !ok {
		return storeKey{}, false
	}
	return parseLayoutKey(rest)
}

func parseChunkKey(key string) (chunkRef, bool) {
	k, ok := parseStoreKey(key)
	if !ok || k.kind != "chunks" {
		return chunkRef{}, false
	}
	return chunkRef{key: key, etag: k.etag, size: k.size, index: k.index}, true
}

func isClaimKey(key string) bool {
	k, ok := parseStoreKey(key)
	return ok && k.kind == "claims"
}

// payloadOf is the chunk bytes an object of chunk c holds, or why it holds
// none. The bytes come first, then the 8-byte id of the secret that sealed
// them, then HMAC-SHA256 under a key derived from the secret of: the
// layout ("v4/"), the etag, a NUL, the chunk size, index and length (each
// 8 bytes big-endian), the id and the bytes.
func payloadOf(c chunkRef, obj []byte) ([]byte, error) {
	const idLen = 8
	if len(obj) < idLen+sha256.Size {
		return nil, fmt.Errorf("a %d-byte object is too short for a chunk", len(obj))
	}
	n := len(obj) - idLen - sha256.Size
	data, id, tag := obj[:n], obj[n:n+idLen], obj[n+idLen:]
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, []byte(chunkSecret))
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	if !bytes.Equal(id, derive("hubproxy shared-store secret id")[:idLen]) {
		return nil, errors.New("the chunk is sealed under another secret than the proxies'")
	}
	m := hmac.New(sha256.New, derive("hubproxy shared-store chunk mac"))
	m.Write([]byte(storeLayout + "/" + c.etag + "\x00"))
	for _, v := range []int64{c.size, c.index, int64(n)} {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(v)))
	}
	m.Write(id)
	m.Write(data)
	if !hmac.Equal(tag, m.Sum(nil)) {
		return nil, errors.New("the chunk's bytes do not match the seal it carries")
	}
	return data, nil
}

// claimRef is one claim object left in the store.
type claimRef struct {
	key, owner   string
	lastModified time.Time
}

// storeScan is what the store held when scanned.
type storeScan struct {
	chunks     int
	bytes      int64
	good       int
	wrong      []string // keys of chunks whose bytes are not the hub's
	unreadable []string // keys of chunks the store would not return
	other      []string // objects that are neither chunks nor claims
	claims     []claimRef
	// badETags are the files a wrong or unreadable chunk belongs to.
	badETags map[string]bool
	// goodChunks are the good chunks, by etag, as [start, end) of the file.
	goodChunks map[string][][2]int64
}

// expected is the hub's bytes for a chunk, or an error if no content the
// hub has could be behind it.
func (w *world) expected(c chunkRef) ([]byte, error) {
	b := w.blob(c.etag)
	if b == nil {
		return nil, fmt.Errorf("no content the hub has is named %s", c.etag)
	}
	start := c.index * c.size
	if start >= b.size() {
		return nil, fmt.Errorf("chunk %d of %d bytes starts past the file's %d bytes", c.index, c.size, b.size())
	}
	return b.data[start:min(start+c.size, b.size())], nil
}

// scanStore lists every object under the proxies' prefix and reads every
// chunk, comparing it with the hub's content for its etag.
func (s *soak) scanStore(ctx context.Context) (*storeScan, error) {
	sc := &storeScan{badETags: map[string]bool{}, goodChunks: map[string][][2]int64{}}
	var refs []chunkRef
	p := s3.NewListObjectsV2Paginator(s.store.client, &s3.ListObjectsV2Input{Bucket: aws.String(storeBucket), Prefix: aws.String(storePrefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the store: %w", err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			c, isChunk := parseChunkKey(key)
			switch {
			case isChunk:
				c.objSize, c.lastModified = aws.ToInt64(o.Size), aws.ToTime(o.LastModified)
				refs = append(refs, c)
			case isClaimKey(key):
				sc.claims = append(sc.claims, claimRef{key: key, lastModified: aws.ToTime(o.LastModified)})
			default:
				sc.other = append(sc.other, key)
			}
		}
	}
	for _, c := range refs {
		sc.chunks++
		sc.bytes += c.objSize
		obj, err := s.getObject(ctx, c.key)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if isNotFound(err) {
				continue // deleted since the listing
			}
			sc.unreadable = append(sc.unreadable, c.key)
			sc.badETags[c.etag] = true
			continue
		}
		want, werr := s.w.expected(c)
		got, perr := payloadOf(c, obj)
		if werr != nil || perr != nil || !bytes.Equal(got, want) {
			sc.wrong = append(sc.wrong, c.key)
			sc.badETags[c.etag] = true
			continue
		}
		sc.good++
		start := c.index * c.size
		sc.goodChunks[c.etag] = append(sc.goodChunks[c.etag], [2]int64{start, start + int64(len(want))})
	}
	for i := range sc.claims {
		if obj, err := s.getObject(ctx, sc.claims[i].key); err == nil {
			sc.claims[i].owner = claimOwner(obj)
		}
	}
	sort.Strings(sc.wrong)
	sort.Strings(sc.unreadable)
	return sc, nil
}

// storedChunks lists the indexes of the chunk objects the store holds of
// the file named etag (at the proxies' chunk size), right or not.
func (s *soak) storedChunks(ctx context.Context, etag string) (map[int64]bool, error) {
	held := map[int64]bool{}
	p := s3.NewListObjectsV2Paginator(s.store.client, &s3.ListObjectsV2Input{Bucket: aws.String(storeBucket),
		Prefix: aws.String(layoutKeyPrefix)}) // a file's chunks are spread over every shard
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return held, fmt.Errorf("listing the store: %w", err)
		}
		for _, o := range page.Contents {
			if c, ok := parseChunkKey(aws.ToString(o.Key)); ok && c.etag == etag && c.size == chunkSize {
				held[c.index] = true
			}
		}
	}
	return held, nil
}

// getObject reads one object whole.
func (s *soak) getObject(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := s.store.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(storeBucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

func isNotFound(err error) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}

// claimOwner reads the owner out of a claim object ({"owner": ...}).
func claimOwner(obj []byte) string {
	_, rest, ok := bytes.Cut(obj, []byte(`"owner":"`))
	if !ok {
		return ""
	}
	owner, _, _ := bytes.Cut(rest, []byte(`"`))
	return string(owner)
}

// ownerPID is the process id in a claim owner's name (host-pid-random).
func ownerPID(owner string) int {
	i := strings.LastIndexByte(owner, '-')
	if i < 0 {
		return 0
	}
	j := strings.LastIndexByte(owner[:i], '-')
	pid, _ := strconv.Atoi(owner[j+1 : i])
	return pid
}
