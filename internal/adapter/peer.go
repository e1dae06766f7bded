package adapter

import (
	"hash/maphash"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// HostOf strips the port and brackets from a "host:port" address, without allocating (see
// core's use of it).
var HostOf = hook.HostOf

// Frameworks on fasthttp give the peer as a *net.TCPAddr, and formatting its IP allocates
// a string on every request; a forwarded address, parsed from the request's bytes, would
// have to be copied out of them. PeerString remembers the strings of recently seen
// addresses in a small direct-mapped cache, so a client that keeps sending (the case that
// matters for a rate limiter) costs no allocation for its address, and the string is the
// cache's own, never the request's. A miss costs what formatting does, plus one small
// entry.
//
// The string is "host:0": Input.Peer's "host:port" form, which core splits without
// allocating. The port plays no part in keys, and leaving it out lets one entry serve
// every connection.
const peerCacheSize = 1024

type peerEntry struct {
	addr netip.Addr
	s    string
}

var (
	peerCache [peerCacheSize]atomic.Pointer[peerEntry]
	peerSeed  = maphash.MakeSeed()
)

// IPString is PeerString of ip, or "" (an unknown peer, which core keys to one shared
// bucket) when ip is not an address.
func IPString(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ""
	}
	return PeerString(a)
}

// PeerString returns a as an Input.Peer, "host:0", from the cache when it can.
func PeerString(a netip.Addr) string {
	a = a.Unmap()
	b := a.As16()
	slot := &peerCache[maphash.Bytes(peerSeed, b[:])%peerCacheSize]
	if e := slot.Load(); e != nil && e.addr == a {
		return e.s
	}
	e := &peerEntry{addr: a, s: netip.AddrPortFrom(a, 0).String()}
	slot.Store(e)
	return e.s
}
