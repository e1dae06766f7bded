package core

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// addrKeys remembers the keys of recently seen clients, shared by every limit, so that an
// IPv6 client (keyed by its prefix) or a client behind trusted proxies costs no allocation
// per request.
var addrKeys hook.StringCache

// clientKey returns the key the client of a request counts against: the IP address of
// in.Peer or, from a trusted proxy, the one it forwarded, IPv6 grouped by prefix. Garbage
// yields a shared fallback key, never an empty one.
func (l *limiter) clientKey(ctx context.Context, in *input) string {
	host := hook.HostOf(in.Peer)
	// With no proxy to trust, nor a warning left to look for, a host without a colon is
	// its own key, as the rest of this function would find: netip accepts only the
	// canonical dotted quad, and a host it refuses is keyed as it is. Parsing the address
	// is a large share of what the limit adds to a route: BenchmarkMiddleware/standard, in
	// each adapter, against a build that parses every peer.
	if host != "" && len(l.cfg.trusted) == 0 && !l.cfg.trustUnix && l.warned.forwarded.Load() &&
		strings.IndexByte(host, ':') < 0 {
		return host
	}
	addr, err := netip.ParseAddr(host)
	if client, ok := l.proxied(addr, in.Request); ok && client.IsValid() {
		return l.formatAddr(client)
	}
	if err != nil {
		if !l.cfg.trustUnix && (host == "" || host == "@" || strings.HasPrefix(host, "/")) {
			l.untrustedPeer(ctx, netip.Addr{}, in) // a unix socket's peer
		}
		if host == "" {
			return "unknown" // one shared bucket rather than an escape from the limit
		}
		return host // a unix socket path or such: still one bucket per name
	}
	l.untrustedPeer(ctx, addr, in)
	if addr.Is4() {
		return host // netip accepts only canonical dotted-quad IPv4: host is the key's text
	}
	return l.formatAddr(addr)
}

// formatAddr returns the key of addr, an IPv6 address grouped in its first ipv6Bits bits:
// the address as netip prints it when the bits cover it all, its prefix otherwise.
func (l *limiter) formatAddr(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	bits := addr.BitLen()
	if addr.Is6() {
		bits = l.cfg.ipv6Bits
	}
	p, _ := addr.Prefix(bits)
	return addrKeys.Get(p.Addr(), bits, prefixKey)
}

func prefixKey(a netip.Addr, bits int) string {
	if bits == a.BitLen() {
		return a.String()
	}
	return netip.PrefixFrom(a, bits).String()
}

// proxied returns the client that a trusted proxy at peer forwarded, and whether peer is
// one; the zero Addr stands for a peer without an address, trusted as "unix"
// (WithTrustedProxies). The client is the zero Addr if such a peer forwarded no address:
// the request stays in the peer's shared bucket.
func (l *limiter) proxied(peer netip.Addr, r Request) (netip.Addr, bool) {
	trusted := l.cfg.trustUnix
	if peer.IsValid() {
		trusted = len(l.cfg.trusted) > 0 && inAny(l.cfg.trusted, peer)
	}
	if !trusted || r == nil {
		return peer, false
	}
	return l.forwardedClient(peer, r), true
}

// inAny reports whether a, unmapped and without its zone, is in one of prefixes.
func inAny(prefixes []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}

// forwardedClient reads the client's address from the one header the trusted proxies set
// (WithForwardedHeader; X-Forwarded-For by default), never from another: a proxy that sets
// X-Real-IP passes on whatever X-Forwarded-For the client sent, so falling back from one
// header to another would let the client choose its own key.
//
// X-Forwarded-For and Forwarded are chains, walked from the right past trusted hops; the
// first untrusted address is the client. The leftmost entries are whatever the client sent,
// so they count only when every hop after them is trusted. A garbled entry stops the walk
// at the last address known good. Any other header holds one address, set by the proxy:
// its last line.
func (l *limiter) forwardedClient(peer netip.Addr, r Request) netip.Addr {
	switch name := l.cfg.forwardedHeader; name {
	case "", "X-Forwarded-For":
		return l.walk(peer, r.Headers("X-Forwarded-For"), strings.TrimSpace)
	case "Forwarded":
		return l.walk(peer, r.Headers("Forwarded"), forValue)
	default:
		// The last line is the one the trusted proxy wrote: a proxy that appends its own
		// line instead of replacing the field passes the client's lines on before it.
		if lines := r.Headers(name); len(lines) > 0 {
			last := strings.TrimSpace(lines[len(lines)-1])
			if a, err := netip.ParseAddr(hook.HostOf(last)); err == nil {
				return a
			}
		}
		return peer
	}
}

// walk walks the comma-separated entries of lines from the right, each entry's address
// being addr(entry), read in place: a client behind proxies sends on every request, and
// splitting would allocate each time.
func (l *limiter) walk(peer netip.Addr, lines []string, addr func(string) string) netip.Addr {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		for line := lines[i]; ; {
			comma := strings.LastIndexByte(line, ',')
			a, err := netip.ParseAddr(hook.HostOf(addr(line[comma+1:])))
			if err != nil {
				return client
			}
			client = a
			if !inAny(l.cfg.trusted, a) {
				return a
			}
			if comma < 0 {
				break
			}
			line = line[:comma]
		}
	}
	return client
}

// forValue returns the for= address of an RFC 7239 Forwarded element, "unknown" (an
// unknown hop) if it has none.
func forValue(elem string) string {
	found := "unknown"
	for pair := range strings.SplitSeq(elem, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			found = strings.Trim(v, `"`)
		}
	}
	return found
}
