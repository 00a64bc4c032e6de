package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// restartStore kills the shared store with SIGKILL and starts it again on
// the same data directory after a.hold.
func (s *soak) restartStore(a action) {
	s.store.chaosMu.Lock()
	defer s.store.chaosMu.Unlock()
	if s.cycle(s.store, a.hold) {
		s.storeKills.Add(1)
	}
}

// storeOutage makes the store unreachable from the proxies for a while,
// refused or silent, while it keeps running.
func (s *soak) storeOutage(ctx context.Context, a action) {
	s.store.outageMu.Lock()
	defer s.store.outageMu.Unlock()
	s.store.relay.set(a.mode)
	s.storeOutages.Add(1)
	hold(ctx, a.hold)
	s.store.relay.set(relayUp)
}

// tampered is one chunk object the chaos changed.
type tampered struct {
	key    string
	onDisk bool
	at     time.Time
}

// tamperLog is what the chaos tampered with, and its choices.
type tamperLog struct {
	mu   sync.Mutex
	rng  *rand.Rand
	done []tampered
	// skipped counts tampers that found no chunk to change (none stored
	// yet, or the store down): the report shows them.
	skipped int
}

func newTamperLog(seed uint64) *tamperLog {
	return &tamperLog{rng: rand.New(rand.NewPCG(seed, 0x7a3e5))}
}

func (t *tamperLog) intN(n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.IntN(n)
}

func (t *tamperLog) list() []tampered {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tampered(nil), t.done...)
}

// tamper changes the bytes of one stored chunk that holds the hub's bytes
// now, keeping its size: through the S3 API (a node or a tool writing
// garbage: the object is whole and readable, its content wrong) or in
// MinIO's files on disk (bit rot: MinIO's own checksums catch it, and the
// object reads as an error). Either way no client may see the bytes, no
// proxy may promote a file made of them, and the chunk must be repaired.
func (s *soak) tamper(ctx context.Context, a action) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	refs, err := s.listChunks(ctx)
	if err != nil || len(refs) == 0 {
		s.tamperSkipped(fmt.Sprintf("no chunk to tamper with (%d listed, %v)", len(refs), err))
		return
	}
	for range 8 {
		c := refs[s.tampers.intN(len(refs))]
		obj, err := s.getObject(ctx, c.key)
		if err != nil {
			continue
		}
		want, werr := s.w.expected(c)
		if got, perr := payloadOf(c, obj); werr != nil || perr != nil || !bytes.Equal(got, want) {
			continue // already wrong: not a fresh tamper
		}
		at := s.tampers.intN(len(want))
		if a.onDisk {
			err = s.tamperOnDisk(c, want, at)
		} else {
			bad := bytes.Clone(obj)
			bad[at] ^= 0x5a // inside the payload: it comes first in the object
			_, err = s.store.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(storeBucket), Key: aws.String(c.key),
				Body: bytes.NewReader(bad), ContentLength: aws.Int64(int64(len(bad)))})
		}
		if err != nil {
			continue
		}
		s.tampers.mu.Lock()
		s.tampers.done = append(s.tampers.done, tampered{key: c.key, onDisk: a.onDisk, at: time.Now()})
		s.tampers.mu.Unlock()
		s.events.add("chaos", fmt.Sprintf("tampered with %s at byte %d", c.key, at))
		return
	}
	s.tamperSkipped("no stored chunk could be read and changed")
}

func (s *soak) tamperSkipped(why string) {
	s.tampers.mu.Lock()
	s.tampers.skipped++
	s.tampers.mu.Unlock()
	s.events.add("chaos", "tamper skipped: "+why)
}

// tamperOnDisk flips the byte at offset at of chunk c's payload in the file
// MinIO keeps it in: part.1 of the object's data directory, or its xl.meta
// for an object small enough to be kept inline. The byte is found by its
// neighbourhood (the payload bytes around it), not by MinIO's format.
func (s *soak) tamperOnDisk(c chunkRef, payload []byte, at int) error {
	dir := filepath.Join(s.store.dir, storeBucket, filepath.FromSlash(c.key))
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (d.Name() == "part.1" || d.Name() == "xl.meta") {
			files = append(files, p)
		}
		return nil
	})
	lo := max(0, at-32)
	probe := payload[lo:min(len(payload), lo+64)]
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := bytes.Index(b, probe)
		if i < 0 {
			continue
		}
		b[i+at-lo] ^= 0x5a
		return os.WriteFile(f, b, 0o644)
	}
	return fmt.Errorf("chunk %s: its bytes are in none of %v", c.key, files)
}

// listChunks lists the chunk objects in the store.
func (s *soak) listChunks(ctx context.Context) ([]chunkRef, error) {
	var out []chunkRef
	p := s3.NewListObjectsV2Paginator(s.store.client, &s3.ListObjectsV2Input{Bucket: aws.String(storeBucket), Prefix: aws.String(layoutKeyPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return out, err
		}
		for _, o := range page.Contents {
			if c, ok := parseChunkKey(aws.ToString(o.Key)); ok {
				c.objSize = aws.ToInt64(o.Size)
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// checkTampered demands, after the run, that every tampered chunk was
// repaired: its object deleted or holding the hub's bytes again. It
// returns how many were.
func (s *soak) checkTampered(ctx context.Context) (repaired int) {
	for _, t := range s.tampers.list() {
		obj, err := s.getObject(ctx, t.key)
		if err != nil && isNotFound(err) {
			repaired++
			continue
		}
		c, _ := parseChunkKey(t.key)
		want, werr := s.w.expected(c)
		got, perr := payloadOf(c, obj)
		if err != nil || werr != nil || perr != nil || !bytes.Equal(got, want) {
			s.fail("store", fmt.Sprintf("the chunk tampered with at %s (%s) is still not the hub's bytes after every file was read: %v %v %v (object sha256 %x)",
				t.at.Format(clock), t.key, err, werr, perr, sha256.Sum256(obj)))
			continue
		}
		repaired++
	}
	return repaired
}

// claimHolder watches the store's claims for up to limit and returns a
// crashy proxy that holds one (a claim names its owner's pid), or nil.
// Killing it leaves its chunk claimed by a dead node: whoever needs the
// chunk next must wait out the lease and take it over.
func (s *soak) claimHolder(limit time.Duration) *proxy {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for ctx.Err() == nil {
		out, err := s.store.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(storeBucket), Prefix: aws.String(layoutKeyPrefix)})
		if err == nil {
			for _, o := range out.Contents {
				if !isClaimKey(aws.ToString(o.Key)) {
					continue
				}
				obj, err := s.getObject(ctx, aws.ToString(o.Key))
				if err != nil {
					continue
				}
				pid := ownerPID(claimOwner(obj))
				for _, p := range s.procs.all[1:] {
					if inc := p.current(); inc != nil && inc.pid == pid {
						return p
					}
				}
			}
		}
		hold(ctx, 10*time.Millisecond)
	}
	return nil
}
