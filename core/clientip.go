package core

import (
	"net"
	"net/netip"
	"strings"
)

// unknownClient is the key of requests whose peer address cannot be parsed (empty, a unix
// socket): they share one bucket rather than escaping the limit.
const unknownClient = "unknown"

// ClientKey returns the key the client of a request counts against: its IP address, IPv6
// grouped by prefix, after trusted proxies. peer is the connection's address ("host:port"
// or a bare host) or, when the application configured its framework's trusted proxies, the
// framework's client IP. Garbage yields a shared fallback key, never an empty one.
func (l *Limiter) ClientKey(peer string, r Request) string {
	host := hostOf(peer)
	addr, err := netip.ParseAddr(host)
	if err != nil {
		if host == "" {
			return unknownClient
		}
		return host // a unix socket path or such: still one bucket per name
	}
	if len(l.cfg.trusted) > 0 && r != nil && l.trusts(addr) {
		return l.formatAddr(l.forwardedClient(addr, r))
	}
	if addr.Is4() {
		// netip accepts only canonical dotted-quad IPv4, so host is already the key's
		// text: no allocation on the common path.
		return host
	}
	return l.formatAddr(addr)
}

func (l *Limiter) formatAddr(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() && l.cfg.ipv6Bits < 128 {
		p, _ := addr.Prefix(l.cfg.ipv6Bits)
		return p.String()
	}
	return addr.String()
}

// hostOf strips the port and brackets from a "host:port" address; a bare host (with or
// without brackets, IPv6 or not) comes back as is. An IPv6 zone is kept for ParseAddr.
func hostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}

func (l *Limiter) trusts(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range l.cfg.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedClient walks the forwarded chain from the right, past trusted hops; the first
// untrusted address is the client. The leftmost entries are whatever the client sent, so
// they count only when every hop after them is trusted. A garbled entry stops the walk at
// the last address known good.
func (l *Limiter) forwardedClient(peer netip.Addr, r Request) netip.Addr {
	hops := r.Headers("X-Forwarded-For")
	if len(hops) == 0 {
		if fwd := r.Headers("Forwarded"); len(fwd) > 0 {
			return l.walk(peer, forwardedFor(fwd))
		}
		if real := r.Header("X-Real-Ip"); real != "" {
			if a, err := netip.ParseAddr(strings.TrimSpace(real)); err == nil {
				return a
			}
		}
		return peer
	}
	var list []string
	for _, h := range hops {
		list = append(list, strings.Split(h, ",")...)
	}
	return l.walk(peer, list)
}

func (l *Limiter) walk(peer netip.Addr, list []string) netip.Addr {
	client := peer
	for i := len(list) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hostOf(strings.TrimSpace(list[i])))
		if err != nil {
			return client
		}
		client = a
		if !l.trusts(a) {
			return a
		}
	}
	return client
}

// forwardedFor extracts the for= addresses of RFC 7239 Forwarded fields, in order.
func forwardedFor(fields []string) []string {
	var out []string
	for _, f := range fields {
		for _, elem := range strings.Split(f, ",") {
			found := "unknown" // an element without for= is an unknown hop
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					found = strings.Trim(v, `"`)
				}
			}
			out = append(out, found)
		}
	}
	return out
}
