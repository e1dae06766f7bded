// Package chilimit limits requests to a whole chi router in one line, per client and per
// route, with reqlimit's strict sliding window:
//
//	r := chi.NewRouter()
//	r.Use(chilimit.Limit(100, time.Minute))
//
// chi runs r.Use middleware before routing, where a nethttp limit does not know the route
// and counts every route in one bucket per client. A chilimit limit asks the router for the
// pattern of the route chi is about to run (r.Pattern, as chi sets it once routed): GET
// /users/1 and GET /users/2 share /users/{id}'s bucket, GET /posts has its own, and
// requests that match no route share one. chi's patterns name no method, so GET and POST
// /users/{id} share one too. It asks for the path chi routes on: the one a
// middleware before the limit set in the route context (middleware.StripSlashes), else the
// escaped path, so a client cannot reach one route while counted under another. Mounted
// in a sub-router's Use, it keys by the whole pattern, prefix included.
//
// It is a nethttp limit otherwise: the same options (package core's, and nethttp's
// WithDenyHandler), the same responses. A limit on one route needs no package of its own:
// r.With(nethttp.Limit(3, time.Minute)).Get("/login", h) runs after routing. This package
// is a module of its own so that applications of other frameworks do not download chi.
package chilimit

import (
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Limit returns middleware for r.Use that admits at most count requests per period, in any
// interval of that length, per client and per route chi matches. Options from package core
// add rates, change the store, the key, the headers and more. Bad arguments panic, naming
// the value and where the limit was registered; use New to get an error instead.
func Limit(count int, period time.Duration, opts ...core.Option) func(http.Handler) http.Handler {
	return nethttp.Limit(count, period, routed(opts)...)
}

// New returns middleware for r.Use enforcing a policy given as text ("3/1m",
// "500/2s,2000/10s"), for limits read from configuration. A bad policy or option is
// returned as an error.
func New(policy string, opts ...core.Option) (func(http.Handler) http.Handler, error) {
	return nethttp.New(policy, routed(opts)...)
}

func routed(opts []core.Option) []core.Option {
	return append(opts[:len(opts):len(opts)], nethttp.WithPattern(pattern))
}

// contexts are route contexts for Find, which fills in the one it is given: reused rather
// than made for every request.
var contexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// pattern returns the pattern of the route chi will run for r, or "" when none matches or
// r is not being served by a chi router.
func pattern(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || rc.Routes == nil {
		return ""
	}
	method := rc.RouteMethod
	if method == "" {
		method = r.Method
	}
	var path string
	if len(rc.RoutePatterns) == 0 && rc.RoutePath != "" {
		// Before routing: the path a middleware ahead of the limit set for chi to route on.
		path = rc.RoutePath
	} else {
		// Not routed yet, or in a mounted sub-router (whose route context holds only the
		// rest of the path): the whole path, asked of the top router, rc.Routes.
		path = r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if path == "" {
			path = "/"
		}
	}
	fc := contexts.Get().(*chi.Context)
	fc.Reset()
	p := rc.Routes.Find(fc, method, path)
	contexts.Put(fc)
	return p
}
