package adapter

import (
	"net"
	"net/netip"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// peers keeps the strings of recently seen addresses: frameworks on fasthttp give the
// peer as a *net.TCPAddr, whose IP formats to a new string on every request, and a
// forwarded address parsed from the request's bytes would have to be copied out of them.
var peers hook.StringCache

// PeerString returns a as an Input.Peer, the bare address, from the cache when it can: the
// port plays no part in keys, and leaving it out lets one entry serve every connection.
func PeerString(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	return peers.Get(a, a.BitLen(), peerText)
}

func peerText(a netip.Addr, _ int) string { return a.String() }

// PeerIP returns a connection's peer as Input.Peer: a TCP peer through PeerString; other
// kinds (unix sockets, test pipes) as their String says; none, or an IP that is not an
// address, as "", an unknown peer, which core keys to one shared bucket.
func PeerIP(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return PeerString(ip)
		}
		return ""
	case nil:
		return ""
	}
	return a.String()
}
