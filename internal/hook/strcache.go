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

// stringEntry holds its address as integers: building and comparing netip values on
// every lookup would cost a good part of what the cache saves.
type stringEntry struct {
	hi, lo uint64
	bits   int
	v4     bool
	s      string
}

// stringCacheSeed varies the slots between processes; the hash only spreads entries over
// slots, so it need not resist anything else.
var stringCacheSeed = rand.Uint64() | 1

// Get returns format(a, bits) for a zoneless address a, from the cache when it was seen
// lately with the same bits.
func (c *StringCache) Get(a netip.Addr, bits int, format func(netip.Addr, int) string) string {
	var hi, lo uint64
	v4 := a.Is4()
	if v4 {
		b := a.As4()
		lo = uint64(binary.BigEndian.Uint32(b[:]))
	} else {
		b := a.As16()
		hi, lo = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	}
	h := (hi^stringCacheSeed)*0x9e3779b97f4a7c15 ^ (lo+uint64(bits))*0xc2b2ae3d27d4eb4f
	slot := &c.slots[h>>(64-stringCacheBits)]
	if e := slot.Load(); e != nil && e.lo == lo && e.hi == hi && e.bits == bits && e.v4 == v4 {
		return e.s
	}
	e := &stringEntry{hi: hi, lo: lo, bits: bits, v4: v4, s: format(a, bits)}
	slot.Store(e)
	return e.s
}
