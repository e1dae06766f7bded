package hook

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
)

// A StringCache remembers the text of recently seen addresses or prefixes: formatting one
// allocates its string, and a client keeps sending from the same address, so a rate
// limiter's common case costs no allocation. Direct-mapped: a collision only costs the
// formatting again, and an entry is compared in full, so a string is never another
// address's. Its zero value is ready to use; it is safe for concurrent use.
type StringCache struct {
	slots [stringCacheSlots]atomic.Pointer[stringEntry]
}

const stringCacheBits = 10
const stringCacheSlots = 1 << stringCacheBits

type stringEntry struct {
	p netip.Prefix
	s string
}

// stringCacheSeed varies the slots between processes; the hash only spreads entries over
// slots, so it need not resist anything else.
var stringCacheSeed = rand.Uint64() | 1

// Get returns format(p), from the cache when p was seen lately.
func (c *StringCache) Get(p netip.Prefix, format func(netip.Prefix) string) string {
	b := p.Addr().As16()
	h := (binary.LittleEndian.Uint64(b[:8])^stringCacheSeed)*0x9e3779b97f4a7c15 ^
		(binary.LittleEndian.Uint64(b[8:])+uint64(p.Bits()))*0xc2b2ae3d27d4eb4f
	slot := &c.slots[h>>(64-stringCacheBits)]
	if e := slot.Load(); e != nil && e.p == p {
		return e.s
	}
	e := &stringEntry{p: p, s: format(p)}
	slot.Store(e)
	return e.s
}
