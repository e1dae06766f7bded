// Package echolimit limits requests to Echo v4 routes, per route, with reqlimit's strict
// sliding window:
//
//	e.GET("/user/test", handler, echolimit.Limit(3, time.Minute))
//
// Requests are keyed by the connection's peer IP and the route template (c.Path(), so
// /user/1 and /user/2 share /user/:id's bucket), also when the middleware is mounted with
// e.Use. Mounted with e.Pre, which runs before routing, it cannot know the route and
// counts every request in one bucket per client; so do requests that match no route.
//
// The client IP is the peer's, unless core.WithClientIPFromFramework says to take
// c.RealIP(), from the application's Echo#IPExtractor. With no IPExtractor set the peer's
// IP is used even then, and the limit warns once: RealIP would believe X-Forwarded-For and
// X-Real-IP from any client. Echo's extractors trust every private, loopback and link-local
// peer unless told otherwise, so an application opts in once its extractor trusts only its
// proxies. Refused requests get 429 with Retry-After; every response carries the IETF
// RateLimit and RateLimit-Policy fields.
//
// A limit that counts by outcome (core.WithCountWhen) takes the response's status once
// the handlers after it have returned: the status written, or 200 when nothing was. When
// they returned an error and wrote nothing, the response is written by Echo's
// HTTPErrorHandler only after every middleware has returned, so the status is the one
// DefaultHTTPErrorHandler writes for the error (an *echo.HTTPError's Code, else 500): an
// HTTPErrorHandler that maps errors to other statuses is not seen. A request whose
// handler panics, or takes the connection over, counts.
package echolimit

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

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
	m := &limited{l: l, deny: deny, frameworkIP: l.FrameworkIP(), needsRequest: l.NeedsRequest()}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		// Echo applies middleware anew for every request, so this closure is allocated
		// each time: it captures two words, not the whole configuration.
		return func(c echo.Context) error { return m.serve(c, next) }
	}
}

type limited struct {
	l                         adapter.Limiter
	deny                      DenyFunc
	frameworkIP, needsRequest bool
}

func (m *limited) serve(c echo.Context, next echo.HandlerFunc) error {
	r := c.Request()
	peer := r.RemoteAddr
	if m.frameworkIP {
		// Without an extractor, RealIP takes X-Forwarded-For and X-Real-IP from any
		// client, so every client could pick its own bucket: the peer it is.
		if c.Echo().IPExtractor != nil {
			peer = c.RealIP()
		} else {
			m.l.WarnFrameworkIP(r.Context(), c.Path(), "the Echo instance has no IPExtractor, and c.RealIP() then believes X-Forwarded-For and X-Real-IP",
				"set e.IPExtractor to echo.ExtractIPFromXFFHeader or echo.ExtractIPFromRealIPHeader, trusting your proxies' ranges")
		}
	}
	// echo.Context is an interface: boxing request allocates, so only when a key, skip,
	// cost or tier function will read it; else core reads the header fields alone, from
	// the net/http request.
	var req core.Request = adapter.HTTPRequest{R: r}
	if m.needsRequest {
		req = &request{c}
	}
	v := m.l.Check(r.Context(), adapter.Input{Route: c.Path(), Peer: peer, Request: req}, adapter.HeaderMap(c.Response().Header()))
	if v.Allowed {
		if v.Release == nil {
			return next(c)
		}
		// The limit counts by outcome: the handlers have answered, or returned the error
		// Echo will answer with. A panic never gets here, and a connection taken over
		// has no status: both count.
		// The writer handlers reach is watched for a hijack, and keeps being an
		// http.Flusher or http.Hijacker exactly when it was: a streaming handler that
		// asks still finds one.
		resp := c.Response()
		w := &adapter.StatusWriter{ResponseWriter: resp.Writer}
		resp.Writer = w.Wrap()
		err := next(c)
		resp.Writer = w.ResponseWriter
		if written, hijacked := w.Written(); !hijacked {
			m.l.Settle(r.Context(), v, status(resp, written, err))
		}
		return err
	}
	if m.deny != nil && adapter.Denies(v) {
		// One that neither wrote nor returned an error would leave Echo to send 200: the
		// refusal is then the default one. What it writes to the http.ResponseWriter
		// itself, or a hijack, Echo does not see as committed: the limit's writer does.
		resp := c.Response()
		w := &adapter.StatusWriter{ResponseWriter: resp.Writer}
		resp.Writer = w.Wrap()
		err := m.deny(c, v.Decision)
		resp.Writer = w.ResponseWriter
		if written, hijacked := w.Written(); err != nil || resp.Committed || written != 0 || hijacked {
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

// status returns the status of a response whose handlers returned err: the one written
// through the limit's writer (by Echo, or by a handler writing to the http.ResponseWriter
// or flushing, which Echo does not see as committed); else the one Echo committed; else
// the one Echo's DefaultHTTPErrorHandler writes for err (an *echo.HTTPError's Code, or
// that of the *echo.HTTPError it holds as Internal; 500 for any other error); else 200,
// which net/http sends for a response left empty.
func status(resp *echo.Response, written int, err error) int {
	switch {
	case written != 0:
		return written
	case resp.Committed:
		return resp.Status
	case err == nil:
		return http.StatusOK
	}
	he, ok := err.(*echo.HTTPError) // not errors.As: the handler does not unwrap either
	if !ok {
		return http.StatusInternalServerError
	}
	if in, ok := he.Internal.(*echo.HTTPError); ok {
		he = in
	}
	return he.Code
}

// A DenyFunc writes the response to a request over the limit, or returns an error for Echo's
// HTTPErrorHandler (echo.NewHTTPError). Rate-limit fields and Retry-After are already set.
// One that writes nothing and returns nil leaves the default refusal, never a 200.
type DenyFunc func(c echo.Context, d core.Decision) error

type denyKey struct{}

// WithDenyHandler replaces the refusal of a request over the limit (429, "Too Many
// Requests") with deny. A refusal the store could not decide (core.FailClosed) and a cost
// above the limit keep their own answers (503 and 413 by default), which deny would make
// read as the client's excess.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

// request is core.Request over echo.Context.
type request struct{ c echo.Context }

func (q *request) Context() context.Context     { return q.c.Request().Context() }
func (q *request) Method() string               { return q.c.Request().Method }
func (q *request) Path() string                 { return q.c.Request().URL.Path }
func (q *request) Route() string                { return q.c.Path() }
func (q *request) Header(name string) string    { return q.c.Request().Header.Get(name) }
func (q *request) Headers(name string) []string { return q.c.Request().Header.Values(name) }
func (q *request) RemoteAddr() string           { return q.c.Request().RemoteAddr }

// Value returns what an earlier middleware stored with c.Set(key, value); key must be a
// string, as Echo's are.
func (q *request) Value(key any) any {
	if k, ok := key.(string); ok {
		return q.c.Get(k)
	}
	return nil
}
