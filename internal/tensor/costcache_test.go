package tensor

import (
	"fmt"
	"sync"
	"testing"
)

// TestCostLRUAccountingAndOrder checks the byte total after each change and
// that the least recently used entry, not the oldest added, goes first.
func TestCostLRUAccountingAndOrder(t *testing.T) {
	const each = 100 + costEntryOverhead
	c := newCostLRU[string, int](3 * each)
	check := func(step string, bytes int64, keys ...string) {
		t.Helper()
		if got := c.Bytes(); got != bytes {
			t.Fatalf("%s: %d bytes, want %d", step, got, bytes)
		}
		if c.Len() != len(keys) {
			t.Fatalf("%s: %d entries, want %d", step, c.Len(), len(keys))
		}
		for _, k := range keys {
			if _, ok := c.byKey[k]; !ok {
				t.Fatalf("%s: %q was evicted", step, k)
			}
		}
	}
	for i, k := range []string{"a", "b", "c"} {
		if !c.Add(k, i, 100) {
			t.Fatalf("Add(%s) refused", k)
		}
	}
	check("three added", 3*each, "a", "b", "c")

	if v, ok := c.Get("a"); !ok || v != 0 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Add("d", 3, 100) // b is now the least recently used
	check("d evicts b", 3*each, "a", "c", "d")
	if _, ok := c.Get("b"); ok {
		t.Fatal("b still cached")
	}

	c.Add("a", 10, 50) // replacing re-counts and refreshes
	check("a replaced", 2*each+50+costEntryOverhead, "a", "c", "d")
	if v, _ := c.Get("a"); v != 10 {
		t.Fatalf("Get(a) = %d after replacing, want 10", v)
	}

	if c.Add("huge", 0, 3*each) { // with its overhead it exceeds the budget
		t.Fatal("an entry over the whole budget was cached")
	}
	check("huge refused", 2*each+50+costEntryOverhead, "a", "c", "d")

	c.Add("e", 4, 2*each-costEntryOverhead) // needs two entries' room: c and d go, a (used last) stays
	check("e evicts c and d", 50+costEntryOverhead+2*each, "a", "e")

	c.Add("f", 5, 3*each-costEntryOverhead) // exactly the budget: everything else goes
	check("f fills the budget", 3*each, "f")
}

// TestCostLRUConcurrent hammers one cache from many goroutines (run with
// -race) and checks that the total stays within the budget and equals the
// sum of what is cached.
func TestCostLRUConcurrent(t *testing.T) {
	const budget = 20_000
	c := newCostLRU[string, int](budget)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint((g*7 + i) % 97)
				if i%3 == 0 {
					c.Get(k)
					continue
				}
				c.Add(k, i, int64(i%500))
				if b := c.Bytes(); b > budget {
					t.Errorf("%d bytes cached, over the %d budget", b, budget)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for el := c.order.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*costEntry[string, int]).cost
	}
	if sum != c.used || c.order.Len() != len(c.byKey) {
		t.Fatalf("used %d, entries sum to %d; %d in order, %d by key", c.used, sum, c.order.Len(), len(c.byKey))
	}
}
