// Command chi is a chi application with reqlimit's limits: GET /user/test 3 a minute,
// GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per X-API-Token (100 on the pro plan), and
// 100 a minute per client and route across the whole router.
//
//	go run . -addr 127.0.0.1:8080
//
// chi runs r.Use middleware before routing, where the route is not yet known: there a
// limit asks the router for the pattern with nethttp.WithPattern, or counts every route in
// one bucket. r.With middleware runs after routing and keys by the pattern by itself.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func newRouter() *chi.Mux {
	r := chi.NewRouter()
	// Router-wide: 100 a minute per client and route, the route found before routing.
	r.Use(nethttp.Limit(100, time.Minute, nethttp.WithPattern(func(req *http.Request) string {
		return r.Find(chi.NewRouteContext(), req.Method, req.URL.Path)
	})))
	hello := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }
	r.With(nethttp.Limit(3, time.Minute)).Get("/user/test", hello)
	r.With(nethttp.Limit(5, time.Second, core.WithRate(20, time.Minute))).Get("/search", hello)
	// Each API token has its own quota, by its plan; requests without one are counted per IP.
	r.With(nethttp.Limit(10, time.Minute, core.WithKey(core.KeyByHeader("X-API-Token")), core.WithTiers(plan, plans))).Get("/api/data", hello)
	return r
}

// plan names the plan of a request's API token: tokens starting "pro-" are on the pro plan
// (100 a minute), "internal-" ones unlimited, others free (the limit's own 10 a minute).
// A real application looks the token up; a client cannot pick its plan by header alone.
func plan(r core.Request) string {
	token := r.Header("X-API-Token")
	switch {
	case strings.HasPrefix(token, "pro-"):
		return "pro"
	case strings.HasPrefix(token, "internal-"):
		return "internal"
	}
	return ""
}

// plans are the policies of the plans other than the free one.
var plans = map[string]string{"pro": "100/1m", "internal": "unlimited"}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: newRouter(), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}
