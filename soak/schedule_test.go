package soak

import (
	"slices"
	"testing"
	"time"
)

func TestScheduleIsAFunctionOfTheSeed(t *testing.T) {
	o := scheduleOpts{duration: 2 * time.Minute, proxies: 2, diskFill: true}
	a, b := makeSchedule(42, o), makeSchedule(42, o)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if slices.Equal(a, makeSchedule(43, o)) {
		t.Fatal("two seeds gave the same schedule")
	}
	for i := 1; i < len(a); i++ {
		if a[i].at < a[i-1].at {
			t.Fatalf("not in time order at %d: %v after %v", i, a[i], a[i-1])
		}
	}
}

// The default run must kill hubproxy at least 20 times whatever the seed,
// and exercise every kind of chaos.
func TestDefaultScheduleHasEverything(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		acts := makeSchedule(seed, scheduleOpts{duration: DefaultDuration, proxies: 1 + DefaultCrashy, diskFill: true, store: true})
		count := map[actionKind]int{}
		for _, a := range acts {
			count[a.kind]++
			if a.kind == actKill && (a.target < 1 || a.target > DefaultCrashy) {
				t.Fatalf("seed %d kills proxy %d; only proxies 1 to %d are crashy", seed, a.target, DefaultCrashy)
			}
		}
		if count[actKill] < 20 {
			t.Fatalf("seed %d: %d kills in the default run", seed, count[actKill])
		}
		for k := actKill; k <= actStorm; k++ {
			if count[k] == 0 {
				t.Fatalf("seed %d: no %s", seed, k)
			}
		}
		if count[actRevoke] != count[actGrant] && count[actRevoke] != count[actGrant]+1 {
			t.Fatalf("seed %d: %d revokes, %d grants", seed, count[actRevoke], count[actGrant])
		}
	}
	if acts := makeSchedule(1, scheduleOpts{duration: DefaultDuration, proxies: 2}); slices.ContainsFunc(acts, func(a action) bool { return a.kind == actDiskFill }) {
		t.Error("a disk fill scheduled without tmpfs")
	}
}

// The two-minute run `make test` does still restarts the store, cuts it off
// and tampers with it, and has an error storm (the attack runs around it),
// whatever the seed; and without a store none of the store's chaos is
// scheduled.
func TestCIScheduleHasTheStoreChaos(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		count := map[actionKind]int{}
		for _, a := range makeSchedule(seed, scheduleOpts{duration: 2 * time.Minute, proxies: 3, diskFill: true, store: true}) {
			count[a.kind]++
		}
		for _, k := range []actionKind{actStoreKill, actStoreOutage, actTamper, actStorm} {
			if count[k] == 0 {
				t.Fatalf("seed %d: no %s in two minutes", seed, k)
			}
		}
	}
	for _, a := range makeSchedule(1, scheduleOpts{duration: DefaultDuration, proxies: 3}) {
		if a.kind == actStoreKill || a.kind == actStoreOutage || a.kind == actTamper {
			t.Fatalf("%v scheduled without a store", a)
		}
	}
}
