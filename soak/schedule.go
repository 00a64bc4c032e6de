package soak

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// actionKind is one kind of chaos.
type actionKind int

const (
	actKill        actionKind = iota // SIGKILL a crashy proxy, restart it after hold
	actDiskFill                      // fill a proxy's tmpfs to the brim for hold
	actOutage                        // make upstream unreachable (mode) for hold
	actRevoke                        // revoke bob's token at the hub
	actGrant                         // give it back
	actAccess                        // set the flip repo's access (gated, private)
	actCommit                        // push a new commit to the moving repo's main
	actExpireURLs                    // invalidate every presigned CDN URL
	actStoreKill                     // SIGKILL the shared store, restart it on its data after hold
	actStoreOutage                   // make the shared store unreachable (mode) for hold
	actTamper                        // change a stored chunk's bytes, keeping its size (onDisk: in MinIO's files)
	actStorm                         // make the hub answer everything 503 (tooMany: 429) for hold
)

func (k actionKind) String() string {
	return [...]string{"kill", "disk-fill", "outage", "revoke", "grant", "access", "commit", "expire-urls",
		"store-kill", "store-outage", "tamper", "storm"}[k]
}

// action is one scheduled piece of chaos.
type action struct {
	at      time.Duration // from the start of the chaos
	kind    actionKind
	target  int           // proxy index; -1 = every proxy (outage)
	hold    time.Duration // how long a kill, disk fill or outage lasts
	mode    relayMode     // outage
	gated   bool          // access
	priv    bool          // access
	onDisk  bool          // tamper: in MinIO's data directory, else through the S3 API
	tooMany bool          // storm: 429 rather than 503
	// kill: rather than target, a crashy proxy caught holding a chunk
	// claim, so another must take the chunk over (storechaos.go)
	claimant bool
}

func (a action) String() string {
	s := fmt.Sprintf("%8.3fs %s", a.at.Seconds(), a.kind)
	switch a.kind {
	case actKill, actDiskFill:
		s += fmt.Sprintf(" proxy %d for %s", a.target, a.hold.Round(time.Millisecond))
		if a.claimant {
			s += " (or whichever crashy proxy holds a chunk claim)"
		}
	case actOutage:
		who := fmt.Sprintf("proxy %d's upstream", a.target)
		if a.target < 0 {
			who = "every upstream"
		}
		s += fmt.Sprintf(" %s %s for %s", who, a.mode, a.hold.Round(time.Millisecond))
	case actAccess:
		s += fmt.Sprintf(" soak/flip gated=%v private=%v", a.gated, a.priv)
	case actStoreKill:
		s += fmt.Sprintf(" down for %s", a.hold.Round(time.Millisecond))
	case actStoreOutage:
		s += fmt.Sprintf(" %s for %s", a.mode, a.hold.Round(time.Millisecond))
	case actTamper:
		s += map[bool]string{true: " on disk", false: " through the S3 API"}[a.onDisk]
	case actStorm:
		who := fmt.Sprintf("proxy %d's hub", a.target)
		if a.target < 0 {
			who = "every hub"
		}
		s += fmt.Sprintf(" %s answers %s to everything for %s", who, map[bool]string{true: "429", false: "503"}[a.tooMany], a.hold.Round(time.Millisecond))
	}
	return s
}

// scheduleOpts is what the schedule depends on besides the seed.
type scheduleOpts struct {
	duration time.Duration
	proxies  int  // proxy 0 is steady, the rest crashy
	diskFill bool // tmpfs caches, so the disk can be filled
	store    bool // the proxies share a store, which the chaos restarts, cuts off and tampers with
}

// makeSchedule draws the whole chaos schedule from seed: the same seed and
// options always give the same schedule, so a failing run replays.
func makeSchedule(seed uint64, o scheduleOpts) []action {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_c4a05))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	var acts []action
	every := func(first, lo, hi time.Duration, mk func(at time.Duration) []action) {
		for t := first; t < o.duration; t += between(lo, hi) {
			acts = append(acts, mk(t)...)
		}
	}
	// At least 20 kills in ten minutes: one every 20 s on average.
	every(between(3*time.Second, 8*time.Second), 14*time.Second, 26*time.Second, func(t time.Duration) []action {
		return []action{{at: t, kind: actKill, target: 1 + rng.IntN(o.proxies-1), hold: between(0, 2*time.Second)}}
	})
	if o.diskFill {
		every(between(10*time.Second, 30*time.Second), 35*time.Second, 70*time.Second, func(t time.Duration) []action {
			return []action{{at: t, kind: actDiskFill, target: rng.IntN(o.proxies), hold: between(4*time.Second, 10*time.Second)}}
		})
	}
	every(between(15*time.Second, 40*time.Second), 40*time.Second, 80*time.Second, func(t time.Duration) []action {
		target := -1
		if rng.IntN(10) >= 4 {
			target = rng.IntN(o.proxies)
		}
		return []action{{at: t, kind: actOutage, target: target, mode: relayMode(1 + rng.IntN(2)), hold: between(3*time.Second, 10*time.Second)}}
	})
	every(between(5*time.Second, 20*time.Second), 25*time.Second, 45*time.Second, func(t time.Duration) []action {
		return []action{{at: t, kind: actRevoke}, {at: t + between(6*time.Second, 18*time.Second), kind: actGrant}}
	})
	gated, priv := false, false
	every(between(5*time.Second, 25*time.Second), 20*time.Second, 40*time.Second, func(t time.Duration) []action {
		// Any other of public, gated, private.
		for {
			ng, np := false, false
			switch rng.IntN(3) {
			case 1:
				ng = true
			case 2:
				np = true
			}
			if ng != gated || np != priv {
				gated, priv = ng, np
				break
			}
		}
		return []action{{at: t, kind: actAccess, gated: gated, priv: priv}}
	})
	every(between(2*time.Second, 10*time.Second), 8*time.Second, 18*time.Second, func(t time.Duration) []action {
		return []action{{at: t, kind: actCommit}}
	})
	every(between(20*time.Second, 40*time.Second), 30*time.Second, 60*time.Second, func(t time.Duration) []action {
		return []action{{at: t, kind: actExpireURLs}}
	})
	if o.store {
		// Drawn after everything else, so a seed's schedule without the
		// store is the same as before the store joined.
		every(between(20*time.Second, 50*time.Second), 50*time.Second, 80*time.Second, func(t time.Duration) []action {
			return []action{{at: t, kind: actStoreKill, hold: between(0, 3*time.Second)}}
		})
		every(between(30*time.Second, 60*time.Second), 50*time.Second, 90*time.Second, func(t time.Duration) []action {
			return []action{{at: t, kind: actStoreOutage, mode: relayMode(1 + rng.IntN(2)), hold: between(3*time.Second, 10*time.Second)}}
		})
		every(between(8*time.Second, 20*time.Second), 15*time.Second, 30*time.Second, func(t time.Duration) []action {
			return []action{{at: t, kind: actTamper, onDisk: rng.IntN(2) == 0}}
		})
		for i := range acts {
			if acts[i].kind == actKill {
				acts[i].claimant = rng.IntN(2) == 0
			}
		}
	}
	// Drawn last, so a seed's schedule is the same as before storms
	// joined, storms aside.
	every(between(10*time.Second, 30*time.Second), 25*time.Second, 45*time.Second, func(t time.Duration) []action {
		target := -1
		if rng.IntN(2) == 0 {
			target = rng.IntN(o.proxies)
		}
		return []action{{at: t, kind: actStorm, target: target, tooMany: rng.IntN(2) == 0, hold: between(3*time.Second, 8*time.Second)}}
	})
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	return acts
}
