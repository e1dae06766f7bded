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
// address's. One cache holds one format. Its zero value is ready to use; it is safe for
// concurrent use.
type StringCache struct {
	slots [stringCacheSlots]atomic.Pointer[stringEntry]
}

const stringCacheBits = 10
const stringCacheSlots = 1 << stringCacheBits

type stringEntry struct {
	a    netip.Addr
	bits int
	s    string
}

// The seeds vary the slots between processes, so that which addresses share a slot
// cannot be known in advance.
var stringCacheSeeds = [2]uint64{rand.Uint64(), rand.Uint64()}

// Get returns format(a, bits) for a zoneless address a, from the cache when it was seen
// lately with the same bits.
func (c *StringCache) Get(a netip.Addr, bits int, format func(netip.Addr, int) string) string {
	slot := &c.slots[slotOf(a, bits)]
	if e := slot.Load(); e != nil && e.a == a && e.bits == bits {
		return e.s
	}
	e := &stringEntry{a: a, bits: bits, s: format(a, bits)}
	slot.Store(e)
	return e.s
}

func slotOf(a netip.Addr, bits int) uint64 {
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	h := (hi^stringCacheSeeds[0])*0x9e3779b97f4a7c15 ^ (lo^stringCacheSeeds[1]+uint64(bits))*0xc2b2ae3d27d4eb4f
	return h >> (64 - stringCacheBits)
}
