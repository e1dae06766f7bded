// Package fiberlimit limits requests to Fiber v3 routes, per route, with reqlimit's strict
// sliding window:
//
//	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), handler)
//
// It offers what package github.com/reqlimit/reqlimit/fiberlimit offers for Fiber v2, so
// moving an application to v3 changes this import as it changes Fiber's.
//
// Requests are keyed by the client IP and the route template (c.Route().Path once a route
// has matched, so /user/1 and /user/2 share /user/:id's bucket). Refused requests get 429
// with Retry-After; every response carries the IETF RateLimit and RateLimit-Policy fields,
// but those fasthttp builds anew (c.SendFile's 304, ctx.Error).
//
// # Client IP
//
// The client IP is the connection's peer, unless the application set Config.TrustProxy
// and a ProxyHeader and the peer is one Config.TrustProxyConfig trusts (the test of
// c.IsProxyTrusted). Then the client is read from the header the trusted proxy wrote:
//
//   - X-Forwarded-For is walked from the right past every hop TrustProxyConfig trusts; the
//     first other address is the client. Each proxy appends the address it was connected
//     from, so that entry was written by a trusted proxy, and everything left of it is
//     whatever the client sent. c.IP() is not used: it returns the leftmost entry (or,
//     without EnableIPValidation, the raw field), with which every client could pick its
//     own bucket.
//   - Any other header except Forwarded (X-Real-IP, CF-Connecting-IP) holds one address:
//     its last line, the one the proxy wrote; Fiber's c.IP() would take the first, which a
//     proxy that appends its line instead of replacing the field leaves to the client.
//   - Forwarded, whose for= parameter Fiber does not parse, is not read: use
//     core.WithTrustedProxies with core.WithForwardedHeader("Forwarded") instead.
//
// An entry that is not an IP address falls back to the peer, so that garbage passed on by
// a trusted proxy cannot mint buckets. Every address TrustProxyConfig trusts is taken for
// a proxy, whose word is believed: Loopback, Private and LinkLocal are safe only where
// those ranges hold nothing but your proxies.
//
// Fiber's trust configuration is the application's only consent: without TrustProxy Fiber
// believes no header, so neither does this package, and core.WithClientIPFromFramework is
// ignored. This differs from package fiberlimit for Fiber v2, where that option believes a
// single-address ProxyHeader from any client when EnableTrustedProxyCheck is off: an
// application that relied on it names its proxies in TrustProxyConfig when it moves to v3.
// core.WithTrustedProxies, which walks the forwarded headers itself, works as everywhere.
//
// # Mounting with app.Use
//
// Middleware mounted with app.Use (or group.Use) runs before routing: the route the
// request will reach is not known yet, and c.Route() reports the Use prefix. A limit
// mounted so therefore counts every request under the prefix, whatever route it reaches
// and also when it reaches none, in one bucket per client: stricter, never looser, than a
// limit per route. Pass the limit to each route (app.Get(path, limit, handler)) for a
// bucket per route.
//
// Fiber's strings point into buffers fasthttp reuses for the next request; the adapter
// hands on only strings of its own: copies of what key functions read, and client IPs
// formatted from the parsed address.
//
// # Counting by outcome
//
// A limit that counts by outcome (core.WithCountWhen) takes the response's status once
// c.Next() has returned: c.Response().StatusCode(), unless c.Next() returned an error.
// That response is written by the app's ErrorHandler only after every handler has
// returned, so the status is the one Fiber's DefaultErrorHandler writes for the error (a
// *fiber.Error's Code, found with errors.As, else 500): an ErrorHandler that maps errors
// to other statuses is not seen. A request whose handler panics, or hijacks the
// connection, counts.
package fiberlimit

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/fastheader"
	"github.com/reqlimit/reqlimit/internal/nocopy"
)

// Limit returns a handler that admits at most count requests per period, in any interval
// of that length, per client and route. Options from package core add rates, change the
// store, the key, the headers and more. Bad arguments panic, naming the value and where the
// limit was registered; use New to get an error instead.
func Limit(count int, period time.Duration, opts ...core.Option) fiber.Handler {
	return middleware(adapter.Must(count, period, opts...))
}

// New returns a handler enforcing a policy given as text ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration. A bad policy or option is returned as an error.
func New(policy string, opts ...core.Option) (fiber.Handler, error) {
	l, err := adapter.Parse(policy, opts...)
	if err != nil {
		return nil, err
	}
	return middleware(l), nil
}

func middleware(l adapter.Limiter) fiber.Handler {
	deny, _ := l.Extension(denyKey{}).(DenyFunc)
	needsRequest := l.NeedsRequest()
	// The trust settings of the app this handler serves, read once: App.Config copies the
	// whole Config, and a handler nearly always serves one app, whose config is fixed.
	var trust atomic.Pointer[proxyTrust]
	return func(c fiber.Ctx) error {
		peer, forwarded := clientIP(c, &trust)
		// Fiber's own context is one pointer, boxed without allocating: given the request,
		// core reads its context only where it needs it, since c.Context() costs a lookup
		// (and a store, on first use). An application's custom context is boxed, which
		// allocates, only for a limit that reads the request.
		var ctx context.Context
		var req core.Request
		if d, ok := c.(*fiber.DefaultCtx); ok {
			req = request[*fiber.DefaultCtx]{d}
		} else if needsRequest {
			req = request[fiber.Ctx]{c}
		} else {
			ctx, req = c.Context(), fields{c.RequestCtx()}
		}
		v := l.Check(ctx, adapter.Input{Route: route(c), Peer: peer, Forwarded: forwarded, Request: req}, (*header)(&c.Response().Header))
		if v.Allowed {
			if v.Release == nil {
				return c.Next()
			}
			// The limit counts by outcome: the handlers have answered, or returned the
			// error the app's ErrorHandler will answer with. A panic never gets here, and
			// a connection taken over or closed by a handler (dropped) has no status
			// the response holds: all count.
			err := c.Next()
			if rc := c.RequestCtx(); !rc.Hijacked() && !adapter.Closed(rc.Conn()) {
				l.Settle(c.Context(), v, status(c, err))
			}
			return err
		}
		if deny != nil && adapter.Denies(v) {
			if answered, err := fastheader.Deny(c.RequestCtx(), func() error { return deny(c, v.Decision) }); answered {
				return err
			}
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return c.Status(v.Status).SendString(l.DenyBody(v.Status, v.Err))
	}
}

// status returns the status of a response whose handlers returned err: the timeout
// response's, when a handler sent one (fasthttp's TimeoutError); else the one Fiber's
// DefaultErrorHandler writes for err (a *fiber.Error's Code, 500 for any other error), or
// the one set when err is nil (200 when none was).
func status(c fiber.Ctx, err error) int {
	if r := c.RequestCtx().LastTimeoutErrorResponse(); r != nil {
		return r.StatusCode()
	}
	if err == nil {
		return c.Response().StatusCode()
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return fiber.StatusInternalServerError
}

// route returns the template of the route the request matched, or "" before routing
// (app.Use), where c.Route() is the Use route and its Path the Use prefix. Fiber reports
// a match only for a route's own handlers, so every request a limit sees before routing,
// 404s included, shares one bucket per client, and no path a client makes up is a key.
func route(c fiber.Ctx) string {
	if c.Matched() {
		return c.Route().Path
	}
	return ""
}

// clientIP returns the request's client address as core reads it (Input.Peer): the
// peer's, or the one the app's trusted proxy forwarded, and whether it is the latter
// (Input.Forwarded).
func clientIP(c fiber.Ctx, cache *atomic.Pointer[proxyTrust]) (string, bool) {
	addr := c.RequestCtx().RemoteAddr()
	t := cache.Load()
	if app := c.App(); t == nil || t.app != app {
		t = newProxyTrust(app)
		cache.Store(t)
	}
	if t.header != "" && t.trustsPeer(addr) {
		if a, ok := t.forwarded(&c.Request().Header); ok {
			return adapter.PeerString(a), true
		}
	}
	return adapter.PeerIP(addr), false
}

// proxyTrust is an app's TrustProxy configuration, decided the way c.IsProxyTrusted
// decides it, for the peer and for every hop of a forwarded chain; unlike
// c.IsProxyTrusted, which formats the address to look it up, it allocates nothing.
type proxyTrust struct {
	app    *fiber.App
	header string // the ProxyHeader to read, "" when none may be
	chain  bool   // header is X-Forwarded-For

	loopback, private, linkLocal, unixSocket bool

	addrs map[netip.Addr]struct{}
	nets  []*net.IPNet
}

func newProxyTrust(app *fiber.App) *proxyTrust {
	cfg := app.Config()
	t := &proxyTrust{app: app}
	if !cfg.TrustProxy || cfg.ProxyHeader == "" || strings.EqualFold(cfg.ProxyHeader, "Forwarded") {
		return t
	}
	tc := cfg.TrustProxyConfig
	t.header, t.chain = cfg.ProxyHeader, strings.EqualFold(cfg.ProxyHeader, fiber.HeaderXForwardedFor)
	t.loopback, t.private, t.linkLocal, t.unixSocket = tc.Loopback, tc.Private, tc.LinkLocal, tc.UnixSocket
	t.addrs = map[netip.Addr]struct{}{}
	for _, p := range tc.Proxies {
		// Parsed as Fiber parses them (entries it cannot parse trust nothing). Fiber
		// matches a single address by the peer's text, so one spelled other than
		// net.IP.String spells it ("2001:DB8::1", "::ffff:10.0.0.1") never matches.
		if strings.IndexByte(p, '/') >= 0 {
			if _, n, err := net.ParseCIDR(p); err == nil {
				t.nets = append(t.nets, n)
			}
		} else if ip := net.ParseIP(p); ip != nil && ip.String() == p {
			a, _ := netip.AddrFromSlice(ip)
			t.addrs[a.Unmap()] = struct{}{}
		}
	}
	return t
}

// trustsPeer reports whether the connection comes from a trusted proxy.
func (t *proxyTrust) trustsPeer(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ok && t.trusts(ip)
	case *net.UnixAddr:
		return t.unixSocket
	}
	return false
}

func (t *proxyTrust) trusts(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	b := a.As16()
	ip := net.IP(b[:]) // net's tests, as Fiber's; this array stays on the stack
	if t.loopback && ip.IsLoopback() || t.private && ip.IsPrivate() || t.linkLocal && ip.IsLinkLocalUnicast() {
		return true
	}
	if _, ok := t.addrs[a]; ok {
		return true
	}
	for _, n := range t.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// forwarded returns the client address the trusted proxy put in the header, or false for
// the peer. A chain's leftmost entries are whatever the client sent: they count only when
// every hop right of them is trusted.
func (t *proxyTrust) forwarded(h *fasthttp.RequestHeader) (netip.Addr, bool) {
	lines := fastheader.Lines(h, t.header)
	if len(lines) == 0 {
		return netip.Addr{}, false
	}
	if !t.chain {
		return fastheader.Address(lines[len(lines)-1])
	}
	var client netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		for line := lines[i]; ; {
			comma := bytes.LastIndexByte(line, ',')
			a, ok := fastheader.Address(line[comma+1:])
			if !ok {
				return netip.Addr{}, false
			}
			if !t.trusts(a) {
				return a, true
			}
			client = a
			if comma < 0 {
				break
			}
			line = line[:comma]
		}
	}
	return client, true
}

// A DenyFunc writes the response to a request over the limit, or returns an error for the app's
// ErrorHandler. Rate-limit fields and Retry-After are already set. One that returns nil
// and leaves the response's status and body as they were gets the default refusal, never
// a 200.
type DenyFunc func(c fiber.Ctx, d core.Decision) error

type denyKey struct{}

// WithDenyHandler replaces the refusal of a request over the limit (429, "Too Many
// Requests") with deny. A refusal the store could not decide (core.FailClosed) and a cost
// above the limit keep their own answers (503 and 413 by default), which deny would make
// read as the client's excess.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

// header sets response fields; a pointer, so boxing it allocates nothing. fasthttp copies
// the values, so they may be transient.
type header fasthttp.ResponseHeader

func (h *header) Set(name, value string) {
	// core sets only its own names, already in fasthttp's normalized form
	// (TestHeaderNamesNormalized), which is also what it sends when normalizing is off:
	// skip normalizing and copying the name, the larger part of setting a field.
	(*fasthttp.ResponseHeader)(h).SetCanonical(nocopy.Bytes(name), nocopy.Bytes(value))
}

// Values returns the field's lines, as transient strings: core only reads them at once.
// Core asks on every request, nearly always of a field not set yet. Its names are stored
// as they are (see Set), so the lines are found by comparing names as stored, without
// the normalized copy of the name that Peek makes on every call.
func (h *header) Values(name string) []string {
	var out []string
	for k, v := range (*fasthttp.ResponseHeader)(h).All() {
		if string(k) == name {
			out = append(out, nocopy.String(v))
		}
	}
	return out
}

// Add adds a line to the field, after those already set.
func (h *header) Add(name, value string) { (*fasthttp.ResponseHeader)(h).Add(name, value) }

// request is core.Request over a fiber.Ctx. Every string it returns is a copy: key
// functions and stores may keep them.
type request[C fiber.Ctx] struct{ c C }

func (q request[C]) Context() context.Context  { return q.c.Context() }
func (q request[C]) Method() string            { return strings.Clone(q.c.Method()) }
func (q request[C]) Path() string              { return strings.Clone(q.c.Path()) }
func (q request[C]) Route() string             { return route(q.c) }
func (q request[C]) Header(name string) string { return strings.Clone(q.c.Get(name)) }
func (q request[C]) RemoteAddr() string        { return q.c.RequestCtx().RemoteAddr().String() }

// Value returns what an earlier handler stored with c.Locals(key, value).
func (q request[C]) Value(key any) any { return q.c.Locals(key) }

func (q request[C]) Headers(name string) []string { return headerLines(&q.c.Request().Header, name) }

func headerLines(h *fasthttp.RequestHeader, name string) []string {
	raw := fastheader.Lines(h, name)
	out := make([]string, len(raw))
	for i, b := range raw {
		out[i] = string(b)
	}
	return out
}

// fields is core.Request over an application's own context's fasthttp request, for a
// limit that reads no more than header fields and the context (NeedsRequest is false):
// one pointer, so boxing it allocates nothing, where the context itself would. Its Route
// is "" and it holds no values, which such a limit never asks for.
type fields struct{ rc *fasthttp.RequestCtx }

func (q fields) Context() context.Context     { return q.rc }
func (q fields) Method() string               { return string(q.rc.Method()) }
func (q fields) Path() string                 { return string(q.rc.Path()) }
func (q fields) Route() string                { return "" }
func (q fields) Header(name string) string    { return string(q.rc.Request.Header.Peek(name)) }
func (q fields) Headers(name string) []string { return headerLines(&q.rc.Request.Header, name) }
func (q fields) RemoteAddr() string           { return q.rc.RemoteAddr().String() }
func (q fields) Value(any) any                { return nil }
