package adapter

import (
	"net"
	"net/netip"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// HostOf strips the port and brackets from a "host:port" address, without allocating (see
// core's use of it).
var HostOf = hook.HostOf

// PeerAddr returns a connection's peer as Input.Peer and Input.Addr: a TCP peer (nearly
// all, and what frameworks on fasthttp hand over) as its parsed address, which core keys
// without formatting it again; other kinds (unix sockets, test pipes) as their String
// says; none as "", an unknown peer, which core keys to one shared bucket.
func PeerAddr(a net.Addr) (string, netip.Addr) {
	switch a := a.(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return "", ip
		}
		return "", netip.Addr{}
	case nil:
		return "", netip.Addr{}
	}
	return a.String(), netip.Addr{}
}
