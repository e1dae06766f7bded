// Package nethttp limits requests to net/http handlers, per route, with reqlimit's strict
// sliding window:
//
//	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute)(h))
//
// Requests are keyed by the connection's peer IP (X-Forwarded-For counts only with
// core.WithTrustedProxies) and the ServeMux pattern that matched. Middleware that runs
// before routing (around a whole ServeMux, or in chi's r.Use) does not know the pattern:
// it counts every request in one bucket per client, unless WithMux or WithPattern lets it
// ask the router (for chi, package chilimit does). Such a limit warns, once, when a request
// it decided with no route comes back routed, r.Pattern set: give it WithMux or
// WithPattern, or core.WithScope if one bucket for every route is meant (core.WithWarnings
// turns warnings off). Refused requests get 429 with Retry-After at once; every response
// carries the IETF RateLimit and RateLimit-Policy fields.
//
// A limit that counts by outcome (core.WithCountWhen) learns the response's status from
// what the handler writes: the first final status it passes to WriteHeader, or 200 when
// it writes the body first or nothing at all. A request whose handler panics, or hijacks
// the connection, counts.
package nethttp

import (
	"cmp"
	"errors"
	"io"
	"net/http"
	"reflect"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Limit returns middleware that admits at most count requests per period, in any interval
// of that length, per client and route. Options from package core add rates, change the
// store, the key, the headers and more. Bad arguments panic, naming the value and where the
// limit was registered; use New to get an error instead.
func Limit(count int, period time.Duration, opts ...core.Option) func(http.Handler) http.Handler {
	return middleware(adapter.Must(count, period, own(opts)...))
}

// own adds to the application's options what marks the limit as net/http's, which has no
// framework client IP for core.WithClientIPFromFramework to take.
func own(opts []core.Option) []core.Option {
	return append([]core.Option{adapter.NoFrameworkIP}, opts...)
}

// New returns middleware enforcing a policy given as text ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration. A bad policy or option is returned as an error.
func New(policy string, opts ...core.Option) (func(http.Handler) http.Handler, error) {
	l, err := adapter.Parse(policy, own(opts)...)
	if err != nil {
		return nil, err
	}
	return middleware(l), nil
}

func middleware(l adapter.Limiter) func(http.Handler) http.Handler {
	deny, _ := l.Extension(denyKey{}).(DenyFunc)
	pattern, _ := l.Extension(patternKey{}).(func(*http.Request) string)
	return func(next http.Handler) http.Handler {
		if next == nil {
			// Refused here, where the route is registered, rather than on every request.
			panic("nethttp: a limit given a nil http.Handler: want the handler it limits")
		}
		return &handler{l: l, next: next, deny: deny, pattern: pattern, needsRequest: l.NeedsRequest()}
	}
}

type handler struct {
	l       adapter.Limiter
	next    http.Handler
	deny    DenyFunc
	pattern func(*http.Request) string

	needsRequest bool
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Before routing (around a whole ServeMux or router) r.Pattern is "", or an outer
	// router's pattern for the whole mux (a prefix under which this one is mounted), and
	// core would count every route in one bucket per client: the router this limit was
	// given (WithMux, WithPattern) is asked instead.
	route, req := r.Pattern, core.Request(adapter.HTTPRequest{R: r})
	if h.pattern != nil {
		route = h.pattern(r)
		if route != r.Pattern && h.needsRequest {
			// Key, skip, cost and tier functions see the route the limit keys by, which
			// r.Pattern does not hold before routing.
			req = &routedRequest{adapter.HTTPRequest{R: r}, route}
		}
	}
	v := h.l.Check(r.Context(), adapter.Input{Route: route, Peer: r.RemoteAddr, Request: req}, adapter.HeaderMap(w.Header()))
	if v.Allowed {
		if v.Release == nil {
			h.next.ServeHTTP(w, r)
		} else {
			// The limit counts by outcome: learn the status the handler writes. A
			// handler that panics is not settled, and counts.
			s := &adapter.StatusWriter{ResponseWriter: w}
			h.next.ServeHTTP(s.Wrap(), r)
			if status, hijacked := s.Written(); !hijacked {
				h.l.Settle(r.Context(), v, cmp.Or(status, http.StatusOK)) // nothing written: net/http sends 200
			}
		}
		if route == "" && r.Pattern != "" && h.pattern == nil {
			// A ServeMux (or chi) behind the limit routed the request, setting r.Pattern
			// on it: the limit runs before routing and counts every route in one bucket.
			// With WithPattern it was asked, and a "" it gave stands (a CONNECT redirect).
			h.l.WarnUnrouted(r.Context(), r.Pattern, unroutedFix)
		}
		return
	}
	if h.deny != nil && adapter.Denies(v) {
		// A deny function that writes nothing would leave net/http to send 200: the
		// refusal is then the default one.
		s := &adapter.StatusWriter{ResponseWriter: w}
		h.deny(s.Wrap(), r, v.Decision)
		if status, hijacked := s.Written(); status != 0 || hijacked {
			return
		}
	}
	w.Header()["Content-Type"] = plainText
	w.WriteHeader(v.Status)
	io.WriteString(w, h.l.DenyBody(v.Status, v.Err))
}

var plainText = []string{"text/plain; charset=utf-8"}

// unroutedFix is how a limit that runs before routing learns the route.
const unroutedFix = "nethttp.WithMux(mux) for a limit around a ServeMux (limit(mux)), chilimit.Limit for chi's r.Use, " +
	"or nethttp.WithPattern for another router"

// A DenyFunc writes the response to a request over the limit. Rate-limit fields and Retry-After
// are already set; the status is the DenyFunc's to write. One that writes nothing leaves
// the default refusal, never a 200.
type DenyFunc func(w http.ResponseWriter, r *http.Request, d core.Decision)

type denyKey struct{}

// WithDenyHandler replaces the refusal of a request over the limit (429, "Too Many
// Requests") with deny. A refusal the store could not decide (core.FailClosed) and a cost
// above the limit keep their own answers (503 and 413 by default), which deny would make
// read as the client's excess.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

type patternKey struct{}

// WithMux lets middleware that wraps a whole ServeMux (rather than one route's handler)
// find the pattern each request will match, so that every route still gets its own
// bucket: handler := nethttp.Limit(100, time.Minute, nethttp.WithMux(mux))(mux). Without
// it, such middleware counts every route in one bucket per client.
func WithMux(mux *http.ServeMux) core.Option {
	if mux == nil {
		return adapter.Refuse(errors.New("WithMux(nil): want the *http.ServeMux the limited handler is registered on"))
	}
	return WithPattern(func(r *http.Request) string {
		h, p := mux.Handler(r)
		if r.Method == http.MethodConnect && reflect.TypeOf(h) == redirectType {
			// A CONNECT redirect's "pattern" is the client's own path plus a slash: one
			// bucket per made-up path. It shares the bucket of requests matching none.
			return ""
		}
		return p
	})
}

var redirectType = reflect.TypeOf(http.RedirectHandler("/", http.StatusTemporaryRedirect))

// WithPattern lets middleware that runs before routing learn the route pattern a request
// will match from pattern, which returns "" when none matches. It is WithMux for other
// routers. pattern must ask for the path the router routes on, or a client reaches a
// route while being counted under another. For chi, whose r.Use middleware runs before
// routing, package chilimit (a module of its own) does this in one line:
//
//	r.Use(chilimit.Limit(100, time.Minute))
//
// Requests whose pattern is "" share one bucket per client. The router is asked even when
// an outer router set r.Pattern (a sub-router, or a mux mounted under a prefix).
func WithPattern(pattern func(*http.Request) string) core.Option {
	if pattern == nil {
		return adapter.Refuse(errors.New("WithPattern(nil): want the function that returns a request's route pattern"))
	}
	return adapter.Option(patternKey{}, pattern)
}

// routedRequest is a request whose route WithMux or WithPattern found before routing.
type routedRequest struct {
	adapter.HTTPRequest
	route string
}

func (q *routedRequest) Route() string { return q.route }
