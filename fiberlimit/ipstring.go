package fiberlimit

import (
	"hash/maphash"
	"net"
	"net/netip"
	"sync/atomic"
)

// fasthttp gives the peer as a *net.TCPAddr, and formatting its IP allocates a string on
// every request. ipString remembers the strings of recently seen addresses in a small
// direct-mapped cache, so a client that keeps sending (the case that matters for a rate
// limiter) costs no allocation for its address. A miss costs what formatting does, plus
// one small entry.
//
// The string is "host:0": adapter.Input.Peer's documented "host:port" form, which core
// splits without allocating. The port plays no part in keys, and leaving it out lets one
// entry serve every connection.
const ipCacheSize = 1024

type ipEntry struct {
	addr netip.Addr
	s    string
}

var (
	ipCache [ipCacheSize]atomic.Pointer[ipEntry]
	ipSeed  = maphash.MakeSeed()
)

func ipString(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return "" // core keys an unknown peer to a shared bucket
	}
	a = a.Unmap()
	b := a.As16()
	slot := &ipCache[maphash.Bytes(ipSeed, b[:])%ipCacheSize]
	if e := slot.Load(); e != nil && e.addr == a {
		return e.s
	}
	e := &ipEntry{addr: a, s: netip.AddrPortFrom(a, 0).String()}
	slot.Store(e)
	return e.s
}
