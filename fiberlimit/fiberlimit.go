// Package fiberlimit limits requests to Fiber v2 routes, per route, with reqlimit's strict
// sliding window:
//
//	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), handler)
//
// Requests are keyed by the connection's peer IP and the route template (c.Route().Path,
// so /user/1 and /user/2 share /user/:id's bucket). When the application turned on
// Config.EnableTrustedProxyCheck with a ProxyHeader that holds one address set by the
// proxy (X-Real-IP, CF-Connecting-IP), the client IP is that header's last line (the one
// the proxy wrote), believed only from TrustedProxies, as Fiber's c.IP() is. With
// EnableTrustedProxyCheck off, such a header is ignored unless the limit opts in with
// core.WithClientIPFromFramework, which believes it from any client: for an application
// that only its proxy can reach. With ProxyHeader X-Forwarded-For (or Forwarded) c.IP() is
// the chain's leftmost entry, which the client writes, so it is never used: there, pass
// core.WithTrustedProxies with your proxies, which walks the chain from the right (with
// core.WithClientIPFromFramework, the limit warns once). Refused requests get 429 with
// Retry-After; every response carries the IETF RateLimit and RateLimit-Policy fields, but
// those fasthttp builds anew (c.SendFile's 304, ctx.Error).
//
// # Mounting with app.Use
//
// Inside middleware mounted with app.Use (or group.Use), Fiber reports the Use prefix as
// the route, not the route the request will reach, and offers no way to know that route
// before running it. A limit mounted so therefore counts every route under the prefix in
// one bucket per client: stricter, never looser, than a limit per route. Pass the limit to
// each route (app.Get(path, limit, handler)) for a bucket per route.
//
// Fiber's strings point into buffers fasthttp reuses for the next request; the adapter
// copies every string it hands on (headers for key functions, forwarded client IPs).
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
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/fastheader"
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
	frameworkIP := l.FrameworkIP()
	return func(c *fiber.Ctx) error {
		peer, forwarded := adapter.PeerIP(c.Context().RemoteAddr()), false
		if header, ok := useFrameworkIP(c.App(), frameworkIP); ok && c.IsProxyTrusted() {
			if a, ok := lastAddress(c, header); ok {
				peer, forwarded = adapter.PeerString(a), true
			}
		} else if frameworkIP && !ok && header != "" {
			l.WarnFrameworkIP(c.UserContext(), c.Route().Path, "Fiber's ProxyHeader is a chain (X-Forwarded-For or Forwarded), and c.IP() takes its leftmost entry, which the client writes",
				"core.WithTrustedProxies with your proxies' ranges instead of this option: it walks the chain from the right")
		}
		v := l.Check(c.UserContext(), adapter.Input{Route: c.Route().Path, Peer: peer, Forwarded: forwarded, Request: request{c}}, (*header)(&c.Response().Header))
		if v.Allowed {
			if v.Release == nil {
				return c.Next()
			}
			// The limit counts by outcome: the handlers have answered, or returned the
			// error the app's ErrorHandler will answer with. A panic never gets here, and
			// a connection taken over or closed by a handler (dropped) has no status
			// the response holds: all count.
			err := c.Next()
			if rc := c.Context(); !rc.Hijacked() && !adapter.Closed(rc.Conn()) {
				l.Settle(c.UserContext(), v, status(c, err))
			}
			return err
		}
		if deny != nil && adapter.Denies(v) {
			if answered, err := fastheader.Deny(c.Context(), func() error { return deny(c, v.Decision) }); answered {
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
func status(c *fiber.Ctx, err error) int {
	if r := c.Context().LastTimeoutErrorResponse(); r != nil {
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

// useFrameworkIP reports whether app's ProxyHeader (returned) may key requests: it must
// hold one address, set by the proxy, and the app must believe it only from TrustedProxies
// (or the limit opted in). App.Config copies the whole Config, hundreds of bytes, so the
// answer is kept for the last app seen (a middleware is nearly always mounted in one app,
// and its config is fixed once it serves).
func useFrameworkIP(app *fiber.App, optIn bool) (string, bool) {
	t := lastApp.Load()
	if t == nil || t.app != app {
		cfg := app.Config()
		t = &appTrust{app: app, header: cfg.ProxyHeader, checked: cfg.EnableTrustedProxyCheck, single: singleAddressHeader(cfg.ProxyHeader)}
		lastApp.Store(t)
	}
	return t.header, t.single && (t.checked || optIn)
}

// lastAddress reads the client's address from the last line of header, the one the
// trusted proxy wrote: Fiber's c.IP() takes the first, which a proxy that appends its own
// line instead of replacing the field leaves to the client. The address is read as core
// and the v3 adapter read one ("ip", "ip:port", "[ipv6]:port"); anything else falls back
// to the peer, so that garbage passed on by a trusted proxy cannot mint buckets. The
// header's bytes belong to the request: they are read in place, and only the parsed
// address is kept.
func lastAddress(c *fiber.Ctx, header string) (netip.Addr, bool) {
	lines := fastheader.Lines(&c.Request().Header, header)
	if len(lines) == 0 {
		return netip.Addr{}, false
	}
	return fastheader.Address(lines[len(lines)-1])
}

// singleAddressHeader reports whether a proxy header holds one address: not empty (then
// c.IP() is the peer anyway), and not a chain, whose leftmost entry Fiber would take.
func singleAddressHeader(name string) bool {
	return name != "" && !strings.EqualFold(name, fiber.HeaderXForwardedFor) && !strings.EqualFold(name, "Forwarded")
}

type appTrust struct {
	app     *fiber.App
	header  string // ProxyHeader
	checked bool   // EnableTrustedProxyCheck
	single  bool   // singleAddressHeader(ProxyHeader)
}

var lastApp atomic.Pointer[appTrust]

// A DenyFunc writes the response to a request over the limit, or returns an error for the app's
// ErrorHandler. Rate-limit fields and Retry-After are already set. One that returns nil
// and leaves the response's status and body as they were gets the default refusal, never
// a 200.
type DenyFunc func(c *fiber.Ctx, d core.Decision) error

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
	(*fasthttp.ResponseHeader)(h).SetCanonical(utils.UnsafeBytes(name), utils.UnsafeBytes(value))
}

// Values returns the field's lines, as transient strings: core only reads them at once.
// Core asks on every request, nearly always of a field not set yet. Its names are stored
// as they are (see Set), so the lines are found by comparing names as stored, without
// the normalized copy of the name that Peek makes on every call.
func (h *header) Values(name string) []string {
	var out []string
	for k, v := range (*fasthttp.ResponseHeader)(h).All() {
		if string(k) == name {
			out = append(out, utils.UnsafeString(v))
		}
	}
	return out
}

// Add adds a line to the field, after those already set.
func (h *header) Add(name, value string) { (*fasthttp.ResponseHeader)(h).Add(name, value) }

// request is core.Request over *fiber.Ctx; one pointer, so boxing it allocates nothing.
// Every string it returns is a copy: key functions and stores may keep them.
type request struct{ c *fiber.Ctx }

func (q request) Context() context.Context  { return q.c.UserContext() }
func (q request) Method() string            { return utils.CopyString(q.c.Method()) }
func (q request) Path() string              { return utils.CopyString(q.c.Path()) }
func (q request) Route() string             { return q.c.Route().Path }
func (q request) Header(name string) string { return utils.CopyString(q.c.Get(name)) }
func (q request) RemoteAddr() string        { return q.c.Context().RemoteAddr().String() }

// Value returns what an earlier handler stored with c.Locals(key, value).
func (q request) Value(key any) any { return q.c.Locals(key) }

func (q request) Headers(name string) []string {
	raw := fastheader.Lines(&q.c.Request().Header, name)
	out := make([]string, len(raw))
	for i, b := range raw {
		out[i] = string(b)
	}
	return out
}
