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
	a = a.Unmap().WithZone("")
	return peers.Get(a, a.BitLen(), peerText)
}

func peerText(a netip.Addr, _ int) string { return netip.AddrPortFrom(a, 0).String() }

// PeerIP returns a connection's peer as Input.Peer: a TCP peer (nearly all, and what
// frameworks on fasthttp hand over) through IPString; other kinds (unix sockets, test
// pipes) as their String says; none as "", an unknown peer.
func PeerIP(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return IPString(a.IP)
	case nil:
		return ""
	}
	return a.String()
}
