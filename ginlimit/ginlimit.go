// Package ginlimit limits requests to Gin routes, per route, with reqlimit's strict sliding
// window:
//
//	r.GET("/user/test", ginlimit.Limit(3, time.Minute), handler)
//
// Requests are keyed by the connection's peer IP and the route template (c.FullPath(), so
// /user/1 and /user/2 share /user/:id's bucket), also when the middleware is mounted with
// r.Use; requests that match no route share one bucket per client. Gin's c.ClientIP() is
// not used by default: until engine.SetTrustedProxies is called Gin believes
// X-Forwarded-For from any client. After calling it, opt in with
// core.WithClientIPFromFramework(); before, that option keys by the peer and warns once
// (the limit's first request asks Gin whether it believes a forged address). Or let
// reqlimit read forwarded headers itself with core.WithTrustedProxies. Refused requests
// get 429 with Retry-After; every response carries the IETF RateLimit and
// RateLimit-Policy fields.
//
// A limit that counts by outcome (core.WithCountWhen) runs the handlers after it itself
// (c.Next) and takes the response's status from c.Writer.Status() once they have
// returned. A request whose handler panics, or takes the connection over, or leaves an
// error in c.Errors with nothing written (for a middleware before the limit to answer,
// with a status the limit cannot know), counts.
package ginlimit

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Limit returns middleware that admits at most count requests per period, in any interval
// of that length, per client and route. Options from package core add rates, change the
// store, the key, the headers and more. Bad arguments panic, naming the value and where the
// limit was registered; use New to get an error instead.
func Limit(count int, period time.Duration, opts ...core.Option) gin.HandlerFunc {
	return middleware(adapter.Must(count, period, opts...))
}

// New returns middleware enforcing a policy given as text ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration. A bad policy or option is returned as an error.
func New(policy string, opts ...core.Option) (gin.HandlerFunc, error) {
	l, err := adapter.Parse(policy, opts...)
	if err != nil {
		return nil, err
	}
	return middleware(l), nil
}

func middleware(l adapter.Limiter) gin.HandlerFunc {
	deny, _ := l.Extension(denyKey{}).(DenyFunc)
	frameworkIP := l.FrameworkIP()
	var trust sync.Once
	var follow bool // whether the engine's client IP is followed, once frameworkIP
	return func(c *gin.Context) {
		// RemoteAddr rather than c.RemoteIP(): core parses every form of it the same way
		// in every adapter, where RemoteIP turns an address without a port into "".
		peer := c.Request.RemoteAddr
		if frameworkIP {
			// The engine's trust is asked once, at the first request: it is set before
			// the engine serves.
			trust.Do(func() { follow = !trustsEveryone(c) })
			if follow || onUnixSocket(c.Request) {
				peer = c.ClientIP()
			} else {
				l.WarnFrameworkIP(c.Request.Context(), c.FullPath(), "Gin trusts every proxy until engine.SetTrustedProxies is called",
					`engine.SetTrustedProxies([]string{"<your proxies' CIDR>"})`)
			}
		}
		v := l.Check(c.Request.Context(), adapter.Input{Route: c.FullPath(), Peer: peer, Request: request{c}}, adapter.HeaderMap(c.Writer.Header()))
		if v.Allowed {
			if v.Release == nil {
				c.Next()
				return
			}
			// The limit counts by outcome: the handlers answer, then the status decides.
			// A panic never gets past c.Next, and a connection taken over has no status:
			// both count.
			w := &hijackWatch{ResponseWriter: c.Writer}
			c.Writer = w
			c.Next()
			c.Writer = w.ResponseWriter
			// Nothing written and an error left in c.Errors: a middleware before the
			// limit will answer for it, with a status not known yet, so it counts.
			if !w.hijacked && (w.Written() || len(c.Errors) == 0) {
				l.Settle(c.Request.Context(), v, w.Status())
			}
			return
		}
		c.Abort()
		if deny != nil && adapter.Denies(v) {
			// One that neither wrote nor set a status would leave Gin to send the status
			// it holds, 200, or 404 and 405 on a path with no route (set before the
			// handlers run): the refusal is then the default one.
			status := c.Writer.Status()
			deny(c, v.Decision)
			if c.Writer.Written() || c.Writer.Status() != status {
				return
			}
		}
		c.String(v.Status, "%s", l.DenyBody(v.Status, v.Err))
	}
}

// A DenyFunc writes the response to a request over the limit; the chain is already aborted.
// Rate-limit fields and Retry-After are already set; the status is the DenyFunc's to write.
// One that writes nothing and sets no status leaves the default refusal, never a 200.
type DenyFunc func(c *gin.Context, d core.Decision)

type denyKey struct{}

// WithDenyHandler replaces the refusal of a request over the limit (429, "Too Many
// Requests") with deny. A refusal the store could not decide (core.FailClosed) and a cost
// above the limit keep their own answers (503 and 413 by default), which deny would make
// read as the client's excess.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

// request is core.Request over *gin.Context; one pointer, so boxing it allocates nothing.
type request struct{ c *gin.Context }

func (q request) Context() context.Context     { return q.c.Request.Context() }
func (q request) Method() string               { return q.c.Request.Method }
func (q request) Path() string                 { return q.c.Request.URL.Path }
func (q request) Route() string                { return q.c.FullPath() }
func (q request) Header(name string) string    { return q.c.Request.Header.Get(name) }
func (q request) Headers(name string) []string { return q.c.Request.Header.Values(name) }
func (q request) RemoteAddr() string           { return q.c.Request.RemoteAddr }

// Value returns what an earlier handler stored with c.Set(key, value).
func (q request) Value(key any) any { v, _ := q.c.Get(key); return v }

// hijackWatch notes whether a handler took the connection over.
type hijackWatch struct {
	gin.ResponseWriter
	hijacked bool
}

// Unwrap lets http.ResponseController reach what Gin's writer offers (deadlines, full
// duplex), as it does without the limit.
func (w *hijackWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.ResponseWriter.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// trustsEveryone reports whether c's engine takes a client IP from the forwarded headers
// of any peer, as Gin does until engine.SetTrustedProxies is called: it asks ClientIP of
// a copy of c holding a request from a documentation address (RFC 5737), which no
// deployment names as its proxy, with the usual forwarded headers (Gin's default
// RemoteIPHeaders among them) naming another. A TrustedPlatform's header is left out: Gin
// believes it from any peer, and setting one says that every request comes through it.
func trustsEveryone(c *gin.Context) bool {
	const forged = "198.51.100.9"
	h := http.Header{}
	for _, name := range []string{"X-Forwarded-For", "X-Real-IP", "True-Client-IP", "X-Client-IP"} {
		h.Set(name, forged)
	}
	probe := c.Copy()
	probe.Request = &http.Request{RemoteAddr: "203.0.113.7:1", Header: h}
	return probe.ClientIP() == forged
}

// onUnixSocket reports whether r came over a unix socket, whose peer Gin always trusts:
// only a process on the host, the proxy, can connect.
func onUnixSocket(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && strings.HasPrefix(a.Network(), "unix")
}
