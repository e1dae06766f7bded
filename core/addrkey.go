package core

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
)

// Formatting an address or a prefix allocates its string, and a client keeps sending from
// the same one: addrKeys remembers the keys of recently seen clients, shared by every
// limit, so that an IPv6 client (keyed by its prefix), a client behind trusted proxies or
// a peer an adapter parsed costs no allocation per request. Direct-mapped: a collision
// only costs the formatting again, and an entry is compared in full, so a key is never
// another address's.
var addrKeys [1024]atomic.Pointer[addrKeyEntry]

type addrKeyEntry struct {
	prefix netip.Prefix
	key    string
}

// addrKeySeed varies the slots between processes; the hash only spreads entries over
// slots, so it need not resist anything else.
var addrKeySeed = rand.Uint64() | 1

// addrKey returns the key of the unmapped, zoneless address a grouped in bits: the
// address as netip prints it when bits covers it all, its prefix otherwise.
func addrKey(a netip.Addr, bits int) string {
	p, _ := a.Prefix(bits)
	b := p.Addr().As16()
	h := (binary.LittleEndian.Uint64(b[:8])^addrKeySeed)*0x9e3779b97f4a7c15 ^
		(binary.LittleEndian.Uint64(b[8:])+uint64(bits))*0xc2b2ae3d27d4eb4f
	slot := &addrKeys[h>>(64-10)]
	if e := slot.Load(); e != nil && e.prefix == p {
		return e.key
	}
	e := &addrKeyEntry{prefix: p, key: p.String()}
	if bits == a.BitLen() {
		e.key = a.String()
	}
	slot.Store(e)
	return e.key
}
