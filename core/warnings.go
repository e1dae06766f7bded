package core

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
)

// WithWarnings(false) turns off the limit's warnings, on by default. A limit warns when it
// limits the wrong clients without failing: a forwarded header from a loopback, private or
// link-local peer that WithTrustedProxies does not trust (a proxy whose clients all share
// its bucket); a request keyed with no route that the router then routed, in an adapter
// whose middleware can run before routing (nethttp: every route shares one bucket);
// WithClientIPFromFramework where the framework would take the client IP from any client,
// so the limit keys by the peer. Each warning names the fix and is given once per limit, to
// the error hook or else to slog at level Warn; it never changes a decision. It never reads
// a public peer's headers, and stops looking after many requests that gave no cause.
func WithWarnings(on bool) Option {
	return func(c *config) error { c.noWarnings = !on; return nil }
}

// warnings are what a limit, with its tiers, has warned of. A flag is set once warned, or
// from the start where the warning cannot apply, so the request path reads one flag.
type warnings struct {
	forwarded atomic.Bool  // a forwarded header from an untrusted local peer
	unrouted  atomic.Bool  // a request keyed with no route, then routed
	framework atomic.Bool  // WithClientIPFromFramework not followed (see WarnFrameworkIP)
	looks     atomic.Int32 // counts down from maxLooks
}

// maxLooks is how many requests without cause to warn (from a public peer, a local one
// without a forwarded header, or one named by a proxy the framework trusts) a limit looks
// at: behind a proxy nearly every request comes from it with one, so after that many there
// is no proxy to warn of, and no address to parse for it.
const maxLooks = 1 << 10

func newWarnings(cfg *config) *warnings {
	w := new(warnings)
	w.looks.Store(maxLooks)
	// The framework's client IP can be a private address with a forwarded header however
	// well it is set up; a scope means one bucket for every route.
	w.forwarded.Store(cfg.noWarnings || cfg.frameworkIP)
	w.unrouted.Store(cfg.noWarnings || cfg.scope != "")
	w.framework.Store(cfg.noWarnings || !cfg.frameworkIP)
	return w
}

// warn gives a warning to the error hook, or else to slog.
func (l *limiter) warn(ctx context.Context, format string, args ...any) {
	err := fmt.Errorf("reqlimit: warning: "+format+
		" Warned once per limit; core.WithWarnings(false) turns warnings off", args...)
	if l.cfg.onError != nil {
		l.cfg.onError(ctx, err)
		return
	}
	slog.WarnContext(ctx, "rate limit misconfigured", "warning", err.Error())
}

// untrustedPeer is told of a request keyed by its own peer's address addr (the zero Addr
// for a unix socket). It warns once if the peer is local and sent a forwarded header: a
// client on the open internet can make the limit neither look at its headers nor fill the
// log. It reads only the request's header fields, which every adapter passes (see
// NeedsRequest).
func (l *limiter) untrustedPeer(ctx context.Context, addr netip.Addr, in *input) {
	r := in.Request
	if l.warned.forwarded.Load() {
		return
	}
	kind := "unix-socket"
	if addr.IsValid() {
		kind = localAddr(addr)
	}
	// A peer that a proxy the framework trusts named (in.Forwarded) comes with that proxy's
	// headers: no cause either.
	name := "" // the forwarded header a local peer sent
	if kind != "" && r != nil && !in.Forwarded {
		for _, n := range [...]string{l.cfg.forwardedHeader, "X-Forwarded-For", "X-Real-Ip", "Forwarded"} {
			if n != "" && r.Header(n) != "" {
				name = n
				break
			}
		}
	}
	if name == "" {
		if l.warned.looks.Add(-1) == 0 {
			l.warned.forwarded.Store(true)
		}
		return
	}
	if l.warned.forwarded.CompareAndSwap(false, true) {
		l.warnForwarded(requestContext(ctx, in), name, kind, addr, in.Route)
	}
}

// warnForwarded warns of a forwarded header name from an untrusted local peer.
func (l *limiter) warnForwarded(ctx context.Context, name, kind string, addr netip.Addr, route string) {
	if name == "X-Real-Ip" {
		name = "X-Real-IP"
	}
	from, trust := "over a unix socket, which", "unix"
	if addr.IsValid() {
		trust = addr.Unmap().WithZone("").String()
		from = fmt.Sprintf("from %s, a %s address that", trust, kind)
	}
	fix := fmt.Sprintf("core.WithTrustedProxies(%q)", trust)
	if !strings.EqualFold(name, cmp.Or(l.cfg.forwardedHeader, "X-Forwarded-For")) {
		fix += fmt.Sprintf(" with core.WithForwardedHeader(%q)", name)
	}
	// A chain from a loopback peer is a proxy on this host: trusting the loopback address
	// for a chain would let any local client put its own entry next (docs/operations.md),
	// so the same-host fixes are named too.
	sameHost := ""
	if kind == "loopback" && (name == "X-Forwarded-For" || name == "Forwarded") {
		sameHost = ` For a proxy on this host, which any local process can reach, rather have it set X-Real-IP ` +
			`and read that alone (core.WithForwardedHeader("X-Real-IP")), or reach the app over a unix socket ` +
			`(core.WithTrustedProxies("unix")).`
	}
	l.warn(ctx, "%s: a request %s core.WithTrustedProxies does not trust carried %s, "+
		"which the limit ignores: it keys by the peer, so if the peer is a proxy, every client behind it shares one bucket. "+
		"Fix: %s, naming the proxy's address or range.%s", l.named(route), from, name, fix, sameHost)
}

// named names the limit, and the route or scope it keyed a request by, for a warning.
func (l *limiter) named(route string) string {
	route = cmp.Or(l.cfg.scope, route)
	if route == "" {
		return "limit " + l.policy.String()
	}
	return fmt.Sprintf("limit %s on %q", l.policy, route)
}

// localAddr names the kind of a loopback, private or link-local address, else returns "".
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
// the router then routed to pattern; fix says how the adapter's users give the limit the
// route.
func (l *limiter) WarnUnrouted(ctx context.Context, pattern, fix string) {
	if l.warned.unrouted.Load() || !l.warned.unrouted.CompareAndSwap(false, true) {
		return
	}
	l.warn(ctx, "limit %s decided a request before routing, with no route, "+
		"and the router then matched it to %q: every route shares one bucket per client. "+
		"Fix: %s; or core.WithScope(name) if one bucket for every route is meant.", l.policy, pattern, fix)
}

// WarnFrameworkIP is told by an adapter that it keys a request on route by the
// connection's peer, not by the framework's client IP that WithClientIPFromFramework
// asked for, because the framework, as configured, would take that IP from any client's
// forwarded header (why); fix says how to configure it.
func (l *limiter) WarnFrameworkIP(ctx context.Context, route, why, fix string) {
	if l.warned.framework.Load() || !l.warned.framework.CompareAndSwap(false, true) {
		return
	}
	l.warn(ctx, "%s: core.WithClientIPFromFramework is given, but %s, which would let every client pick its own bucket. "+
		"The limit keys by the connection's peer instead: behind a proxy, every client shares the proxy's bucket. Fix: %s.",
		l.named(route), why, fix)
}
