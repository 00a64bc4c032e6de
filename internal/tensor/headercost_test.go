package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// syntheticFile builds the header of a safetensors file of n tensors named
// and shaped like a large mixture-of-experts checkpoint's, with some
// metadata. It returns the file's first 8+N bytes (all Parse reads) and the
// whole file's size; the data buffer itself is never built.
func syntheticFile(n int, prefix string) (head []byte, size int64) {
	dtypes := []struct {
		name  string
		bytes uint64
	}{{"BF16", 2}, {"F32", 4}, {"F8_E4M3", 1}, {"I64", 8}}
	var js strings.Builder
	js.WriteString(`{"__metadata__":{"format":"pt","source":"synthetic"}`)
	var off uint64
	for i := range n {
		d := dtypes[i%len(dtypes)]
		var shape []uint64
		switch i % 3 {
		case 0:
			shape = []uint64{uint64(i%7 + 1)}
		case 1:
			shape = []uint64{2, uint64(i%5 + 1)}
		default:
			shape = []uint64{2, 3, uint64(i%4 + 1)}
		}
		elems := uint64(1)
		dims := make([]string, len(shape))
		for j, v := range shape {
			elems *= v
			dims[j] = fmt.Sprint(v)
		}
		end := off + elems*d.bytes
		fmt.Fprintf(&js, `,"%smodel.layers.%d.mlp.experts.%d.down_proj.weight":{"dtype":%q,"shape":[%s],"data_offsets":[%d,%d]}`,
			prefix, i/256, i%256, d.name, strings.Join(dims, ","), off, end)
		off = end
	}
	js.WriteString("}")
	for js.Len()%8 != 0 {
		js.WriteByte(' ')
	}
	head = make([]byte, 8, 8+js.Len())
	binary.LittleEndian.PutUint64(head, uint64(js.Len()))
	head = append(head, js.String()...)
	return head, int64(len(head)) + int64(off)
}

// TestHeaderCostMatchesHeap parses a header of 50,000 tensors and compares
// headerCost with the heap the parsed header really keeps alive, measured
// after a full collection before and after. The estimate must be within a
// factor of two either way: close enough that the cache's budget means
// what it says. The tolerance is that wide because the allocator's size
// classes and the map layout are modelled, not read, and because -race
// builds and other runtimes allocate a little differently; the estimate
// is well inside it on a normal and a -race build alike.
func TestHeaderCostMatchesHeap(t *testing.T) {
	head, size := syntheticFile(50_000, "")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, err := header.Parse(bytes.NewReader(head), size, header.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(h)
	runtime.KeepAlive(head)
	measured := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	est := headerCost(h)
	ratio := float64(est) / float64(measured)
	t.Logf("%d tensors, %d-byte header: estimated %d bytes, measured %d bytes (ratio %.2f)",
		len(h.Tensors), h.HeaderLen, est, measured, ratio)
	if ratio < 0.5 || ratio > 2 {
		t.Fatalf("estimate %d bytes is not within a factor of 2 of the measured %d bytes", est, measured)
	}
}

// TestHeaderCacheStaysWithinBudget serves several files whose headers cost
// more together than the cache's budget, reads each, and checks the cache
// never holds more than the budget, evicts the least recently used header,
// and does not cache a header larger than the whole budget.
func TestHeaderCacheStaysWithinBudget(t *testing.T) {
	files := map[string][]byte{}
	for i := range 6 {
		head, size := syntheticFile(2000, fmt.Sprintf("f%d.", i))
		files[fmt.Sprintf("f%d.safetensors", i)] = pad(head, size)
	}
	bigHead, bigSize := syntheticFile(20_000, "big.")
	files["big.safetensors"] = pad(bigHead, bigSize)

	one, err := header.Parse(bytes.NewReader(files["f0.safetensors"]), int64(len(files["f0.safetensors"])), header.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Room for two of the small headers, not three, and not for the big one.
	// Each entry costs its header, its key (the fake's quoted SHA-256 ETag)
	// and the cache's own overhead.
	perEntry := headerCost(one) + int64(len(`"`)*2+64) + costEntryOverhead
	budget := 5 * perEntry / 2
	fake := newFakeFiles(files)
	var mu sync.Mutex
	seen := map[string]int{}
	s := New(fake, Options{HeaderCacheBytes: budget, Observe: func(r string) {
		mu.Lock()
		seen[r]++
		mu.Unlock()
	}})
	locate := func(i int) {
		t.Helper()
		name := fmt.Sprintf("f%d.model.layers.0.mlp.experts.0.down_proj.weight", i)
		if _, _, err := s.Locate(t.Context(), hub.Caller{}, testRef(fmt.Sprintf("f%d.safetensors", i)), name); err != nil {
			t.Fatal(err)
		}
		if b := s.headers.Bytes(); b > budget {
			t.Fatalf("after f%d: the cache holds %d bytes, over its %d budget", i, b, budget)
		}
	}
	for i := range 6 {
		locate(i)
	}
	if n := s.headers.Len(); n != 2 {
		t.Fatalf("%d headers cached, want the 2 that fit", n)
	}
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return seen["parsed"], seen["cached"]
	}
	locate(5) // recent: cached
	locate(0) // evicted long ago: parsed again
	if p, c := counts(); p != 7 || c != 1 {
		t.Fatalf("parsed %d, cached %d; want 7 and 1", p, c)
	}

	bytesBefore := s.headers.Bytes()
	for range 2 {
		if _, _, err := s.Locate(t.Context(), hub.Caller{}, testRef("big.safetensors"), "big.model.layers.0.mlp.experts.0.down_proj.weight"); err != nil {
			t.Fatal(err)
		}
	}
	if p, c := counts(); p != 9 || c != 1 {
		t.Fatalf("after the big header twice: parsed %d, cached %d; want 9 and 1 (never cached)", p, c)
	}
	if b := s.headers.Bytes(); b != bytesBefore {
		t.Fatalf("the big header changed the cache from %d to %d bytes", bytesBefore, b)
	}
}

// pad extends head to a whole file of size bytes.
func pad(head []byte, size int64) []byte {
	out := make([]byte, size)
	copy(out, head)
	return out
}

// TestHeaderCacheDefaultBudget pins the default the operator documentation
// promises.
func TestHeaderCacheDefaultBudget(t *testing.T) {
	s := New(newFakeFiles(nil), Options{})
	if s.opts.HeaderCacheBytes != 64<<20 || s.headers.budget != 64<<20 {
		t.Fatalf("default budget %d (cache %d), want 64 MiB", s.opts.HeaderCacheBytes, s.headers.budget)
	}
}
