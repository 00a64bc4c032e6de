package soak

import (
	"math/rand/v2"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// rearmEvery is how often every hub's faults are drawn afresh.
const rearmEvery = 500 * time.Millisecond

// maxCutAt bounds how many body bytes a cutting fault lets through, which
// bounds the bytes each such fault spends (ledger.go).
const maxCutAt = 32 << 10

// faultPlan draws fault configurations from the seed: every fault kind
// hubtest has, each armed for a few of the next requests of a random
// target, with per-connection bandwidth caps and latency. The byte-wasting
// kinds (wrong ranges, ignored ranges, corruption, stalls) are rarer than
// the ones that cost a few KiB at most (5xx, 429, resets, truncations).
type faultPlan struct {
	rng *rand.Rand
	// corrupt is the one file CorruptBytes may hit (world.corruptKey).
	corrupt string
}

func newFaultPlan(seed uint64, corrupt string) *faultPlan {
	return &faultPlan{rng: rand.New(rand.NewPCG(seed, 0xfa017)), corrupt: corrupt}
}

// next draws the configuration for the next rearmEvery.
func (p *faultPlan) next() hubtest.Faults {
	r := p.rng
	fault := func(maxN int) hubtest.Fault {
		return hubtest.Fault{N: int64(r.IntN(maxN + 1)), Target: hubtest.Target(r.IntN(4))}
	}
	f := hubtest.Faults{
		Status5xx:         fault(4),
		TooManyRequests:   fault(3),
		ResetMidBody:      fault(4),
		Truncate:          fault(4),
		StallBody:         fault(1),
		WrongContentRange: fault(2),
		CorruptBytes:      hubtest.Fault{N: int64(r.IntN(3)), Target: hubtest.TargetAny},
		RedirectForeign:   fault(2),
		CorruptPath:       p.corrupt,
		// Some stalls outlast hubproxy's stall-timeout (2s), some do not.
		StallFor: time.Duration(200+r.IntN(3800)) * time.Millisecond,
		CutAt:    int64(1 + r.IntN(maxCutAt)),
		Latency:  time.Duration(r.IntN(15)) * time.Millisecond,
	}
	if r.IntN(10) < 3 {
		f.IgnoreRange = fault(1)
	}
	f.BandwidthPerConn = [...]int64{0, 4 << 20, 16 << 20, 64 << 20}[r.IntN(4)]
	return f
}
