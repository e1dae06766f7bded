// Package echolimit limits requests to Echo v5 routes, per route, with reqlimit's strict
// sliding window:
//
//	e.GET("/user/test", handler, echolimit.Limit(3, time.Minute))
//
// It offers what package github.com/reqlimit/reqlimit/echolimit offers for Echo v4, so
// moving an application to v5 changes this import as it changes Echo's.
//
// Requests are keyed by the connection's peer IP and the route template (c.Path(), so
// /user/1 and /user/2 share /user/:id's bucket), also when the middleware is mounted with
// e.Use. Mounted with e.Pre, which runs before routing, it cannot know the route and
// counts every request in one bucket per client; so do requests that match no route.
//
// The client IP is the peer's, unless core.WithClientIPFromFramework says to take
// c.RealIP(), from the application's Echo#IPExtractor. Even then, an IPExtractor that is
// echo.LegacyIPExtractor() is not followed: it believes X-Forwarded-For and X-Real-IP from
// any client, so every client could pick its own bucket; the peer's IP is used instead, and
// the limit warns once. Echo's other extractors trust every private, loopback and
// link-local peer unless told otherwise, so an application opts in once its extractor
// trusts only its proxies. Refused requests get 429 with Retry-After; every response
// carries the IETF RateLimit and RateLimit-Policy fields.
//
// A limit that counts by outcome (core.WithCountWhen) takes the response's status once
// the handlers after it have returned: the status written through the writer they get
// from it (whatever that wraps), or 200 when nothing was. When they returned an error and
// wrote nothing, the
// response is written by Echo's HTTPErrorHandler only after every middleware has
// returned, so the status is the one DefaultHTTPErrorHandler writes for the error (that
// of the echo.HTTPStatusCoder it wraps, else 500): an HTTPErrorHandler that maps errors
// to other statuses is not seen. A request whose handler panics, or takes the
// connection over, counts.
package echolimit

import (
	"context"
	"io"
	"reflect"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Limit returns middleware that admits at most count requests per period, in any interval
// of that length, per client and route. Options from package core add rates, change the
// store, the key, the headers and more. Bad arguments panic, naming the value and where the
// limit was registered; use New to get an error instead.
func Limit(count int, period time.Duration, opts ...core.Option) echo.MiddlewareFunc {
	return middleware(adapter.Must(count, period, opts...))
}

// New returns middleware enforcing a policy given as text ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration. A bad policy or option is returned as an error.
func New(policy string, opts ...core.Option) (echo.MiddlewareFunc, error) {
	l, err := adapter.Parse(policy, opts...)
	if err != nil {
		return nil, err
	}
	return middleware(l), nil
}

func middleware(l adapter.Limiter) echo.MiddlewareFunc {
	deny, _ := l.Extension(denyKey{}).(DenyFunc)
	m := &limited{l: l, deny: deny, frameworkIP: l.FrameworkIP()}
	// Echo v5 applies middleware once, when a route or chain is built, not per request.
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error { return m.serve(c, next) }
	}
}

type limited struct {
	l           adapter.Limiter
	deny        DenyFunc
	frameworkIP bool
}

func (m *limited) serve(c *echo.Context, next echo.HandlerFunc) error {
	r := c.Request()
	peer := r.RemoteAddr
	if m.frameworkIP {
		if trustedExtractor(c.Echo()) {
			peer = c.RealIP()
		} else if e := c.Echo(); e != nil && e.IPExtractor != nil {
			m.l.WarnFrameworkIP(r.Context(), c.Path(), "the Echo instance's IPExtractor is echo.LegacyIPExtractor(), which believes X-Forwarded-For and X-Real-IP",
				"set e.IPExtractor to echo.ExtractIPFromXFFHeader or echo.ExtractIPFromRealIPHeader, trusting your proxies' ranges")
		}
	}
	// c.Path() is "" before routing (e.Pre) and when nothing matched: one bucket per
	// client. A 405, or a 404 caught by a RouteNotFound route (which groups with
	// middleware register), reports a registered pattern, never the request's path.
	// c.RouteInfo() copies the route on every call.
	v := m.l.Check(r.Context(), adapter.Input{Route: c.Path(), Peer: peer, Request: (*request)(c)}, adapter.HeaderMap(c.Response().Header()))
	if v.Allowed {
		if v.Release == nil {
			return next(c)
		}
		// The limit counts by outcome: the handlers have answered, or returned the error
		// Echo will answer with. A panic never gets here, and a connection taken over
		// has no status: both count.
		//
		// The status is read where handlers write: the writer they get from here is
		// watched, whatever it wraps (Echo's HEAD writer, which commits without keeping
		// the status, or an application's wrapper without Unwrap, behind which Echo
		// cannot find its Response). Only a status not written through it (an error
		// left for the error handler) is resolved as Echo resolves it.
		status, hijacked, err := watched(c, func() error { return next(c) })
		if hijacked {
			return err
		}
		if status == 0 {
			_, status = echo.ResolveResponseStatus(c.Response(), err)
		}
		m.l.Settle(r.Context(), v, status)
		return err
	}
	if m.deny != nil && adapter.Denies(v) {
		// One that neither wrote nor returned an error would leave Echo to send 200: the
		// refusal is then the default one. What it writes is watched as above.
		if status, hijacked, err := watched(c, func() error { return m.deny(c, v.Decision) }); err != nil || status != 0 || hijacked {
			return err
		}
	}
	// Not c.String: its "charset=UTF-8" would differ from the other adapters'.
	w := c.Response()
	w.Header()["Content-Type"] = plainText
	w.WriteHeader(v.Status)
	_, err := io.WriteString(w, m.l.DenyBody(v.Status, v.Err))
	return err
}

var plainText = []string{"text/plain; charset=utf-8"}

// legacyExtractor is the code of echo.LegacyIPExtractor(), a plain function: every
// extractor it returns shares it, and no other extractor has it.
var legacyExtractor = reflect.ValueOf(echo.LegacyIPExtractor()).Pointer()

// trustedExtractor reports whether e's IPExtractor may name the client. With none,
// c.RealIP() is the peer anyway, and the peer as given keeps core's handling of addresses
// Echo cannot parse. LegacyIPExtractor takes the client's own word for its address.
// Asked on every request, not cached per Echo, so that an extractor set or replaced
// after the first request is still seen; comparing code pointers allocates nothing. A
// function that merely calls LegacyIPExtractor's is not recognised: that is the
// application's own extractor, trusted like any other.
func trustedExtractor(e *echo.Echo) bool {
	return e != nil && e.IPExtractor != nil && reflect.ValueOf(e.IPExtractor).Pointer() != legacyExtractor
}

// watched runs handle with the writer it writes through watched (adapter.StatusWriter),
// and returns the status written through that writer (0 if none), whether it took the
// connection over, and its error.
func watched(c *echo.Context, handle func() error) (status int, hijacked bool, err error) {
	rw := c.Response()
	w := &adapter.StatusWriter{ResponseWriter: rw}
	c.SetResponse(w.Wrap())
	err = handle()
	c.SetResponse(rw)
	status, hijacked = w.Written()
	return status, hijacked, err
}

// A DenyFunc writes the response to a request over the limit, or returns an error for Echo's
// HTTPErrorHandler (echo.NewHTTPError). Rate-limit fields and Retry-After are already set.
// One that writes nothing and returns nil leaves the default refusal, never a 200.
type DenyFunc func(c *echo.Context, d core.Decision) error

type denyKey struct{}

// WithDenyHandler replaces the refusal of a request over the limit (429, "Too Many
// Requests") with deny. A refusal the store could not decide (core.FailClosed) and a cost
// above the limit keep their own answers (503 and 413 by default), which deny would make
// read as the client's excess.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

// request is core.Request over echo.Context. Defined on the Context struct itself, so
// that (*request)(c) is a pointer conversion: handing it to core allocates nothing.
type request echo.Context

func (q *request) c() *echo.Context             { return (*echo.Context)(q) }
func (q *request) Context() context.Context     { return q.c().Request().Context() }
func (q *request) Method() string               { return q.c().Request().Method }
func (q *request) Path() string                 { return q.c().Request().URL.Path }
func (q *request) Route() string                { return q.c().Path() }
func (q *request) Header(name string) string    { return q.c().Request().Header.Get(name) }
func (q *request) Headers(name string) []string { return q.c().Request().Header.Values(name) }
func (q *request) RemoteAddr() string           { return q.c().Request().RemoteAddr }

// Value returns what an earlier middleware stored with c.Set(key, value); key must be a
// string, as Echo's are.
func (q *request) Value(key any) any {
	if k, ok := key.(string); ok {
		return q.c().Get(k)
	}
	return nil
}
