package tensor

import (
	"container/list"
	"sync"
)

// costEntryOverhead is what the cache itself spends on one entry, on top of
// the cost its caller states: the list element, the entry record, and the
// entry's share of the key map. It is counted so that many tiny entries
// cannot outgrow the budget either.
const costEntryOverhead = 160

// costLRU is a least-recently-used cache bounded by the sum of its entries'
// costs (bytes, for the header cache) rather than by their number, so one
// huge value cannot pin memory that a count bound would let it keep. Safe
// for concurrent use.
type costLRU[K comparable, V any] struct {
	mu     sync.Mutex
	budget int64
	used   int64
	order  list.List // of *costEntry[K, V], most recently used first
	byKey  map[K]*list.Element
}

type costEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int64 // the caller's cost plus costEntryOverhead
}

// newCostLRU returns an empty cache that holds at most budget in total.
func newCostLRU[K comparable, V any](budget int64) *costLRU[K, V] {
	return &costLRU[K, V]{budget: budget, byKey: map[K]*list.Element{}}
}

// Get returns the value cached under key and marks it most recently used.
func (c *costLRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*costEntry[K, V]).val, true
}

// Add caches val under key at the given cost, replacing what key held, and
// evicts the least recently used entries until the total fits the budget.
// A value that alone costs more than the whole budget is not cached (and
// evicts nothing); Add reports whether val was cached.
func (c *costLRU[K, V]) Add(key K, val V, cost int64) bool {
	cost = max(cost, 0) + costEntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if cost > c.budget {
		return false
	}
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	c.byKey[key] = c.order.PushFront(&costEntry[K, V]{key: key, val: val, cost: cost})
	c.used += cost
	for c.used > c.budget {
		c.remove(c.order.Back())
	}
	return true
}

func (c *costLRU[K, V]) remove(el *list.Element) {
	e := c.order.Remove(el).(*costEntry[K, V])
	delete(c.byKey, e.key)
	c.used -= e.cost
}

// Bytes is the total cost of the cached entries, overhead included.
func (c *costLRU[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len is the number of cached entries.
func (c *costLRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}
