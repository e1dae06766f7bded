package hook

import (
	"hash/maphash"
	"net/netip"
	"sync/atomic"
)

// A StringCache remembers the text of recently seen addresses (or prefixes): formatting
// one allocates its string, and a client keeps sending from the same address, so that a
// rate limiter's common case costs no allocation. Direct-mapped: a collision only costs
// the formatting again, and an entry is compared in full, so a string is never another
// address's. Its zero value is ready to use; it is safe for concurrent use.
type StringCache[K netip.Addr | netip.Prefix] struct {
	slots [stringCacheSlots]atomic.Pointer[stringEntry[K]]
}

const stringCacheSlots = 1024

type stringEntry[K comparable] struct {
	k K
	s string
}

var stringCacheSeed = maphash.MakeSeed()

// Get returns format(k), from the cache when k was seen lately.
func (c *StringCache[K]) Get(k K, format func(K) string) string {
	slot := &c.slots[maphash.Comparable(stringCacheSeed, k)%stringCacheSlots]
	if e := slot.Load(); e != nil && e.k == k {
		return e.s
	}
	e := &stringEntry[K]{k: k, s: format(k)}
	slot.Store(e)
	return e.s
}
