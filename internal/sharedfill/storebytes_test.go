package sharedfill

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// readTallied reads [off, off+n) through o as a cache fill does, counting
// it in a request's tally, and returns the bytes and the tally.
func readTallied(t *testing.T, o Upstream, off, n int64) ([]byte, *cache.Tally) {
	t.Helper()
	body, err := o.FetchRange(context.Background(), off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	var tally cache.Tally
	bt := tally.For(body)
	var out []byte
	buf := make([]byte, 5000) // not a divisor of the chunk: reads straddle sources
	for {
		k, err := body.Read(buf)
		out = append(out, buf[:k]...)
		bt.Add(int64(k))
		if err == io.EOF {
			return out, &tally
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Review of the shared tier (issue 21): bytes the store served were logged
// as upstream's. The shared origin's bodies say which of their bytes the
// store served: a stored chunk's, and a landed chunk's that a waiter read;
// never the bytes of this node's own fetch, nor a waiter's direct blocks.
func TestStoreBytesAreToldApart(t *testing.T) {
	store := fileStore(t)
	data := randomData(31, 3*testChunk+999)
	size := int64(len(data))
	up := &upstream{data: data}
	a := newSharer(t, store, nil, Options{})
	off, n := int64(testChunk+10), int64(testChunk) // chunks 1 and 2
	got, tally := readTallied(t, a.Origin(etagOf(31), size, up), off, n)
	if !bytes.Equal(got, data[off:off+n]) || tally.Bytes() != n || tally.StoreBytes() != 0 {
		t.Fatalf("the fetching node: upstream %d store %d; want %d and 0", tally.Bytes(), tally.StoreBytes(), n)
	}
	// The whole file: chunks 1 and 2 are stored, 0 and 3 fetched. (A
	// reader that joins this node's flight on a chunk reads its buffer,
	// upstream's bytes: wait for the flights to end, so it is the store.)
	flightsDone(t, a)
	got, tally = readTallied(t, a.Origin(etagOf(31), size, up), 0, size)
	if !bytes.Equal(got, data) || tally.StoreBytes() != 2*testChunk || tally.Bytes() != size-2*testChunk {
		t.Fatalf("half stored: upstream %d store %d; want %d and %d", tally.Bytes(), tally.StoreBytes(), size-2*testChunk, 2*testChunk)
	}
	flightsDone(t, a)
	b := newSharer(t, store, nil, Options{})
	got, tally = readTallied(t, b.Origin(etagOf(31), size, up), 0, size)
	if !bytes.Equal(got, data) || tally.StoreBytes() != size || tally.Bytes() != 0 {
		t.Fatalf("another node: upstream %d store %d; want 0 and %d", tally.Bytes(), tally.StoreBytes(), size)
	}
}

// flightsDone waits until s has no flight: every chunk it fetched is put.
func flightsDone(t *testing.T, s *Sharer) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the flights to end", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.flights) == 0
	})
}

// A waiter's bytes: those of the landed chunk are the store's; those it
// read around a stuck owner are upstream's.
func TestWaiterStoreBytes(t *testing.T) {
	store := fileStore(t)
	data := randomData(32, testChunk)
	slow := &trickle{data: data, piece: 4 << 10, pause: 20 * time.Millisecond}
	owner := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond})
	ownerDone := make(chan []byte)
	go func() { ownerDone <- read(t, owner.Origin(etagOf(32), testChunk, slow), 0, testChunk) }()
	claimHeld(t, owner, store, etagOf(32))
	waiter := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond, MaxWait: time.Minute, FallbackAfter: time.Minute})
	up := &trickle{data: data, piece: 64 << 10}
	got, tally := readTallied(t, waiter.Origin(etagOf(32), testChunk, up), 0, testChunk)
	if !bytes.Equal(got, data) || up.bytes.Load() != 0 || tally.StoreBytes() != testChunk || tally.Bytes() != 0 {
		t.Errorf("a waiter for a landed chunk: upstream sent %d, tally upstream %d store %d; want 0, 0, %d", up.bytes.Load(), tally.Bytes(), tally.StoreBytes(), testChunk)
	}
	<-ownerDone

	stuck := &trickle{data: data, piece: 4 << 10, gate: make(chan struct{})}
	defer close(stuck.gate)
	owner2 := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond})
	go func() {
		if body, err := owner2.Origin(etagOf(33), testChunk, stuck).FetchRange(context.Background(), 0, testChunk); err == nil {
			io.Copy(io.Discard, body)
			body.Close()
		}
	}()
	claimHeld(t, owner2, store, etagOf(33))
	waiter2 := newSharer(t, store, nil, Options{Lease: 150 * time.Millisecond, MaxWait: time.Minute, FallbackAfter: 30 * time.Millisecond})
	up2 := &trickle{data: data, piece: 64 << 10}
	off, n := int64(1000), int64(20<<10)
	got, tally = readTallied(t, waiter2.Origin(etagOf(33), testChunk, up2), off, n)
	if !bytes.Equal(got, data[off:off+n]) || tally.Bytes() != n || tally.StoreBytes() != 0 {
		t.Errorf("a waiter reading around a stuck owner: tally upstream %d store %d; want %d and 0", tally.Bytes(), tally.StoreBytes(), n)
	}
}
