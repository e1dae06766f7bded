package core

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
)

// WithWarnings(false) turns off the limit's warnings. A limit warns when what it sees
// suggests it is configured so that it limits the wrong clients without failing: a
// forwarded header (X-Forwarded-For, X-Real-IP, Forwarded, the WithForwardedHeader one)
// from a loopback, private or link-local peer that WithTrustedProxies does not trust,
// the mark of a proxy whose clients all share its one bucket; or, in an adapter whose
// middleware can run before routing (nethttp), a request keyed with no route that the
// router then routed, where every route shares one bucket. Each warning names what was
// seen, what it costs and the fix, and is given once per limit in the process, to the
// error hook (WithErrorHook) or else to slog at level Warn. A warning never changes a
// decision. Warnings are on by default. The headers of requests from public peers are
// never looked at, and those of local peers no longer once many came without one (a
// service called from its own network, no proxy in front).
func WithWarnings(on bool) Option {
	return func(c *config) error { c.noWarnings = !on; return nil }
}

// warnings are what a limit has warned of, shared by the limiters of its tiers. A flag is
// set once the warning is given, or from the start when it cannot apply, so that the
// request path reads one flag to know it has nothing to look at.
type warnings struct {
	forwarded atomic.Bool // a forwarded header from an untrusted local peer
	unrouted  atomic.Bool // a request keyed with no route, then routed

	// unheaded counts down the requests from local peers without a forwarded header:
	// behind a proxy that sends one, nearly every request does, so after many without,
	// the peers are the clients themselves (a service called from its own network), and
	// looking at every request's headers stops.
	unheaded atomic.Int32
}

// localLooks is how many requests from local peers without a forwarded header a limit
// looks at before it stops looking.
const localLooks = 1 << 10

// newWarnings returns the warnings of a limit configured with cfg, the ones that cannot
// apply already given.
func newWarnings(cfg *config) *warnings {
	w := new(warnings)
	w.unheaded.Store(localLooks)
	if cfg.noWarnings || cfg.frameworkIP {
		// Under WithClientIPFromFramework the peer is the framework's client IP, which
		// can be a private address with a forwarded header however well it is set up.
		w.forwarded.Store(true)
	}
	if cfg.noWarnings || cfg.scope != "" {
		// A scope names the buckets: one bucket for every route is what it says.
		w.unrouted.Store(true)
	}
	return w
}

// warn gives a warning to the error hook, or else to slog.
func (l *limiter) warn(ctx context.Context, err error) {
	if l.cfg.onError != nil {
		l.cfg.onError(ctx, err)
		return
	}
	slog.WarnContext(ctx, "rate limit misconfigured", "warning", err.Error())
}

// named is how warnings name the limit: its policy, and its route if known.
func (l *limiter) named(route string) string {
	if l.cfg.scope != "" {
		route = l.cfg.scope
	}
	if route == "" {
		return "limit " + l.policy.String()
	}
	return fmt.Sprintf("limit %s on %q", l.policy, route)
}

// untrustedPeer is called for a request keyed by its own peer's address, host (IPv4 as
// netip prints it) or addr, or by neither for a peer without an address (a unix socket,
// not trusted as "unix"). Until the limit has warned, it warns if the peer is local and
// sent a forwarded header: a client on the open internet cannot make the limit look, nor
// fill the log.
func (l *limiter) untrustedPeer(host string, addr netip.Addr, r Request) {
	if r != nil && !l.warned.forwarded.Load() {
		l.watchForwarded(host, addr, r)
	}
}

// watchForwarded is untrustedPeer's look at the peer and the request's headers.
func (l *limiter) watchForwarded(host string, addr netip.Addr, r Request) {
	var kind string
	switch {
	case host != "":
		kind = localIPv4(host)
	case addr.IsValid():
		kind = localAddr(addr)
	default:
		kind = "unix-socket"
	}
	if kind == "" {
		return
	}
	name := l.forwardedSeen(r)
	if name == "" {
		if l.warned.unheaded.Add(-1) == 0 {
			l.warned.forwarded.Store(true)
		}
		return
	}
	if !l.warned.forwarded.CompareAndSwap(false, true) {
		return
	}
	l.warn(r.Context(), l.forwardedWarning(name, kind, host, addr, r.Route()))
}

// forwardedSeen returns the name of a forwarded header r carries, or "".
func (l *limiter) forwardedSeen(r Request) string {
	if n := l.cfg.forwardedHeader; n != "" && r.Header(n) != "" {
		return n
	}
	for _, n := range [...]string{"X-Forwarded-For", "X-Real-Ip", "Forwarded"} {
		if r.Header(n) != "" {
			return n
		}
	}
	return ""
}

// forwardedWarning is the text of the forwarded-header warning.
func (l *limiter) forwardedWarning(name, kind, host string, addr netip.Addr, route string) error {
	if name == "X-Real-Ip" {
		name = "X-Real-IP"
	}
	var from, trust string
	switch {
	case kind == "unix-socket":
		from, trust = "over a unix socket, which", "unix"
	case host != "":
		from, trust = fmt.Sprintf("from %s, a %s address that", host, kind), host
	default:
		trust = addr.Unmap().WithZone("").String()
		from = fmt.Sprintf("from %s, a %s address that", trust, kind)
	}
	fix := fmt.Sprintf("core.WithTrustedProxies(%q)", trust)
	configured := l.cfg.forwardedHeader
	if configured == "" {
		configured = "X-Forwarded-For"
	}
	if !strings.EqualFold(name, configured) {
		fix += fmt.Sprintf(" with core.WithForwardedHeader(%q)", name)
	}
	return fmt.Errorf("reqlimit: warning: %s: a request %s core.WithTrustedProxies does not trust carried %s, "+
		"which the limit ignores: it keys by the peer, so if the peer is a proxy, every client behind it shares one bucket. "+
		"Fix: %s, naming the proxy's address or range. "+
		"Warned once per limit; core.WithWarnings(false) turns warnings off",
		l.named(route), from, name, fix)
}

// localIPv4 names the kind of a dotted-quad IPv4 address as netip prints it when it is
// loopback, private or link-local, else returns "". It reads the text: parsing it on
// every request from a public client would cost more than the check is worth.
func localIPv4(host string) string {
	switch {
	case strings.HasPrefix(host, "127."):
		return "loopback"
	case strings.HasPrefix(host, "10."), strings.HasPrefix(host, "192.168."):
		return "private"
	case strings.HasPrefix(host, "169.254."):
		return "link-local"
	case len(host) > len("172.16.") && strings.HasPrefix(host, "172.") && host[6] == '.' &&
		host[4] == '1' && host[5] >= '6' && host[5] <= '9',
		len(host) > len("172.20.") && strings.HasPrefix(host, "172.") && host[6] == '.' &&
			(host[4] == '2' || host[4] == '3' && host[5] <= '1'):
		return "private" // 172.16.0.0/12
	}
	return ""
}

// localAddr is localIPv4 for any address.
func localAddr(a netip.Addr) string {
	switch a = a.Unmap(); {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	}
	return ""
}

// WarnUnrouted is told by an adapter of a request the limit keyed with no route, which
// the router then routed to pattern: the limit runs before routing, and every route
// shares one bucket. fix says how the adapter's users give the limit the route.
func (l *limiter) WarnUnrouted(ctx context.Context, pattern, fix string) {
	if l.warned.unrouted.Load() || !l.warned.unrouted.CompareAndSwap(false, true) {
		return
	}
	l.warn(ctx, fmt.Errorf("reqlimit: warning: limit %s decided a request before routing, with no route, "+
		"and the router then matched it to %q: every route shares one bucket per client. "+
		"Fix: %s; or core.WithScope(name) if one bucket for every route is meant. "+
		"Warned once per limit; core.WithWarnings(false) turns warnings off",
		l.policy, pattern, fix))
}
