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
// address's. One cache holds one format: the format a lookup passes is not part of the
// key. Its zero value is ready to use; it is safe for concurrent use.
type StringCache struct {
	slots [stringCacheSlots]atomic.Pointer[stringEntry]
}

const stringCacheBits = 10
const stringCacheSlots = 1 << stringCacheBits

// stringEntry holds its address as integers: building and comparing netip values on
// every lookup would cost a good part of what the cache saves.
type stringEntry struct {
	hi, lo uint64
	bits   int
	v4     bool
	s      string
}

// The seeds vary the slots between processes, so that which addresses share a slot
// cannot be known in advance; sharing one only costs formatting again.
var stringCacheSeeds = [2]uint64{rand.Uint64(), rand.Uint64()}

// Get returns format(a, bits) for a zoneless address a, from the cache when it was seen
// lately with the same bits.
func (c *StringCache) Get(a netip.Addr, bits int, format func(netip.Addr, int) string) string {
	hi, lo, v4 := words(a)
	slot := &c.slots[slotOf(hi, lo, bits)]
	if e := slot.Load(); e != nil && e.lo == lo && e.hi == hi && e.bits == bits && e.v4 == v4 {
		return e.s
	}
	e := &stringEntry{hi: hi, lo: lo, bits: bits, v4: v4, s: format(a, bits)}
	slot.Store(e)
	return e.s
}

// words returns a's 128 bits, or its 32 in lo when it is IPv4.
func words(a netip.Addr) (hi, lo uint64, v4 bool) {
	if a.Is4() {
		b := a.As4()
		return 0, uint64(binary.BigEndian.Uint32(b[:])), true
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), false
}

func slotOf(hi, lo uint64, bits int) uint64 {
	h := (hi^stringCacheSeeds[0])*0x9e3779b97f4a7c15 ^ (lo^stringCacheSeeds[1]+uint64(bits))*0xc2b2ae3d27d4eb4f
	return h >> (64 - stringCacheBits)
}
