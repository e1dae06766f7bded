package core

import (
	"net/netip"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// addrKeys remembers the keys of recently seen clients, shared by every limit, so that an
// IPv6 client (keyed by its prefix) or a client behind trusted proxies costs no allocation
// per request.
var addrKeys hook.StringCache

// addrKey returns the key of the unmapped, zoneless address a grouped in bits: the
// address as netip prints it when bits covers it all, its prefix otherwise.
func addrKey(a netip.Addr, bits int) string {
	p, _ := a.Prefix(bits)
	return addrKeys.Get(p.Addr(), bits, prefixKey)
}

func prefixKey(a netip.Addr, bits int) string {
	if bits == a.BitLen() {
		return a.String()
	}
	return netip.PrefixFrom(a, bits).String()
}
