package soak

import (
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// ledgerBlock is the granularity of the byte ledger: hubproxy's block size
// (proxyArgs), so one fill of a block is one block's worth here.
const ledgerBlock = 64 << 10

// coverage counts, per block of one blob, the bytes of it that complete
// upstream answers carried.
type coverage map[int64]int64

// add counts the bytes [start, end).
func (c coverage) add(start, end int64) {
	for start < end {
		b := start / ledgerBlock
		next := min((b+1)*ledgerBlock, end)
		c[b] += next - start
		start = next
	}
}

// excess is how many of the counted bytes go beyond lives fetches of each
// block: fills repeated within one life of the blob in the cache.
func (c coverage) excess(size, lives int64) int64 {
	var n int64
	for b, got := range c {
		blockLen := min(ledgerBlock, size-b*ledgerBlock)
		n += max(0, got-blockLen*lives)
	}
	return n
}

// answerSpans is the byte spans of a blob of size bytes that a complete
// answer to rec carried: the whole blob for a 200 (a Range ignored, or
// none), else every range of the Range header.
func answerSpans(rec hubtest.RequestRecord, size int64) [][2]int64 {
	spec, ok := strings.CutPrefix(rec.Range, "bytes=")
	if rec.Status == 200 || !ok {
		return [][2]int64{{0, size}}
	}
	var out [][2]int64
	for _, part := range strings.Split(spec, ",") {
		a, b, _ := strings.Cut(strings.TrimSpace(part), "-")
		start, err1 := strconv.ParseInt(a, 10, 64)
		end, err2 := strconv.ParseInt(b, 10, 64)
		switch {
		case a == "" && err2 == nil: // suffix
			out = append(out, [2]int64{max(size-end, 0), size})
		case err1 == nil && b == "":
			out = append(out, [2]int64{start, size})
		case err1 == nil && err2 == nil:
			out = append(out, [2]int64{start, min(end+1, size)})
		}
	}
	return out
}
