package cache

import (
	"context"
	"errors"

	"github.com/hubproxy/hubproxy/internal/cache/ranges"
)

// Read-ahead belongs to the handle that planned it. A fill of blocks a reader
// needs runs detached to completion, so a disconnecting client never aborts
// what another reader (or its own retry) waits for. Read-ahead is a guess
// that the reader stays: once its handle is closed or its context ends, the
// fills it planned are cancelled, whether still waiting for a slot of
// Options.MaxFills or streaming, so clients that hang up early cost at most
// what was already in flight. A read-ahead fill that another reader has come
// to wait for is adopted instead: it is detached from its owner and runs to
// completion like a fill that reader planned itself.

// errAbandoned is the cause of a read-ahead fill cancelled because its
// handle went away.
var errAbandoned = errors.New("cache: read-ahead abandoned")

// fillJob is one upstream request a reader planned: a run of blocks claimed
// in item.pending.
type fillJob struct {
	r ranges.Range
	// ctx carries the reader's values, never its cancellation; a
	// read-ahead fill's can be cancelled through ahead.
	ctx   context.Context
	ahead *aheadFill // nil for a fill of blocks the reader needs
}

// aheadFill is the claim of a read-ahead fill while it is queued or in flight,
// registered in item.ahead.
type aheadFill struct {
	// Immutable.
	r      ranges.Range
	cancel context.CancelCauseFunc

	// Guarded by item.mu.
	owner     *Handle // nil once adopted: it runs to completion
	cancelled bool    // its owner went away; it releases its claim without failing
}

// jobsLocked turns the ranges planLocked claimed for need into fill jobs for
// h. A range that starts past need's blocks is read-ahead: it gets a
// cancellable context and is registered under h. Registering under it.mu,
// which abandon takes too, means h cannot miss one: ensure plans read-ahead
// only while h is not gone.
func (h *Handle) jobsLocked(need ranges.Range, todo []ranges.Range) []fillJob {
	it := h.it
	base := context.WithoutCancel(h.ctx)
	needEnd := it.blocksOf(need).End
	jobs := make([]fillJob, 0, len(todo))
	for _, r := range todo {
		if r.Pos < needEnd { // planLocked never lets a chunk straddle needEnd
			jobs = append(jobs, fillJob{r: r, ctx: base})
			continue
		}
		ctx, cancel := context.WithCancelCause(base)
		af := &aheadFill{r: r, cancel: cancel, owner: h}
		if it.ahead == nil {
			it.ahead = make(map[*aheadFill]struct{})
		}
		it.ahead[af] = struct{}{}
		jobs = append(jobs, fillJob{r: r, ctx: ctx, ahead: af})
	}
	return jobs
}

// adoptLocked detaches from their owners the read-ahead fills of other
// handles that hold blocks of need not yet present: h is about to wait for
// them, so they must outlive their owner. h's own read-ahead is not adopted
// by h's waiting: if h goes away, nobody is left to wait for it.
func (it *item) adoptLocked(h *Handle, need ranges.Range) {
	if len(it.ahead) == 0 {
		return
	}
	missing := it.present.Missing(it.blocksOf(need))
	for af := range it.ahead {
		if af.owner == nil || af.owner == h || af.cancelled {
			continue
		}
		for _, m := range missing {
			if !m.Intersect(af.r).IsEmpty() {
				af.owner = nil
				break
			}
		}
	}
}

// abandonLocked cancels h's read-ahead fills that nobody adopted. Each
// releases the rest of its claim when it stops (see Store.fill).
func (it *item) abandonLocked(h *Handle) {
	for af := range it.ahead {
		if af.owner == h && !af.cancelled {
			af.cancelled = true
			af.cancel(errAbandoned)
		}
	}
}

// endAheadLocked unregisters a finished fill's read-ahead claim, if it has
// one, and reports whether its owner cancelled it.
func (it *item) endAheadLocked(af *aheadFill) (abandoned bool) {
	if af == nil {
		return false
	}
	delete(it.ahead, af)
	af.cancel(nil) // frees the context; the fill is over either way
	return af.cancelled
}

// abandon marks h gone, so it plans no more read-ahead, and cancels the
// read-ahead it planned that nobody adopted. It runs when h is closed or its
// context ends, whichever comes first, and may run twice.
func (h *Handle) abandon() {
	h.it.mu.Lock()
	defer h.it.mu.Unlock()
	h.gone = true
	h.it.abandonLocked(h)
}
