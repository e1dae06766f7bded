package adapter

import (
	"net"
	"net/netip"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// HostOf strips the port and brackets from a "host:port" address, without allocating (see
// core's use of it).
var HostOf = hook.HostOf

// Frameworks on fasthttp give the peer as a *net.TCPAddr, and formatting its IP allocates
// a string on every request; a forwarded address, parsed from the request's bytes, would
// have to be copied out of them. PeerString takes the strings of recently seen addresses
// from a cache, so a client that keeps sending (the case that matters for a rate limiter)
// costs no allocation for its address, and the string is the cache's own, never the
// request's.
//
// The string is "host:0": Input.Peer's "host:port" form, which core splits without
// allocating. The port plays no part in keys, and leaving it out lets one entry serve
// every connection.
var peers hook.StringCache

// PeerString returns a as an Input.Peer, "host:0", from the cache when it can. The
// string is netip's: an Input carrying it sets Canonical.
func PeerString(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	return peers.Get(a, a.BitLen(), peerText)
}

func peerText(a netip.Addr, _ int) string { return netip.AddrPortFrom(a, 0).String() }

// PeerIP returns a connection's peer as Input.Peer, and Input.Canonical: a TCP peer
// (nearly all, and what frameworks on fasthttp hand over) through PeerString; other kinds
// (unix sockets, test pipes) as their String says; none, or an IP that is not an address,
// as "", an unknown peer, which core keys to one shared bucket.
func PeerIP(a net.Addr) (peer string, canonical bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return PeerString(ip), true
		}
		return "", false
	case nil:
		return "", false
	}
	return a.String(), false
}
