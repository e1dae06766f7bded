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
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func newRouter() *chi.Mux {
	r := chi.NewRouter()
	// Router-wide: 100 a minute per client and route, the route found before routing;
	// requests with an issued token on /api/data are counted by their plan alone.
	r.Use(nethttp.Limit(100, time.Minute, nethttp.WithPattern(chiPattern(r)), core.WithSkip(planned)))
	hello := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }
	r.With(nethttp.Limit(3, time.Minute)).Get("/user/test", hello)
	r.With(nethttp.Limit(5, time.Second, core.WithRate(20, time.Minute))).Get("/search", hello)
	// Each API token issued has its own quota, by its plan; other requests are counted per IP.
	r.With(nethttp.Limit(10, time.Minute, core.WithKey(token), core.WithTiers(plan, plans), nethttp.WithDenyHandler(tooMany))).Get("/api/data", hello)
	return r
}

// chiPattern returns the pattern of the route chi will run for a request, "" for none,
// asking for the path chi routes on: the one a middleware before the limit set in the
// route context (StripSlashes, CleanPath), else the escaped path. Asked for another path,
// the router would name another route's pattern for GET /user/a%2Fposts, which chi runs
// as /user/{id}: a second quota for that route. Limits go after middleware that changes
// the path.
func chiPattern(r chi.Routes) func(*http.Request) string {
	return func(req *http.Request) string {
		path := req.URL.RawPath
		if path == "" {
			path = req.URL.Path
		}
		if rc := chi.RouteContext(req.Context()); rc != nil && rc.RoutePath != "" {
			path = rc.RoutePath
		}
		return r.Find(chi.NewRouteContext(), req.Method, path)
	}
}

// issued stands for the application's store of the API tokens it issued, and their plans.
var issued = map[string]string{"alice": "free", "pro-7f3a9c": "pro", "internal-2b81e4": "internal"}

// token keys a request by its API token if the application issued it, any other request
// by the client's IP: keyed by whatever it sends, a client would make up a token for a
// fresh quota whenever its own ran out.
func token(r core.Request) (string, error) {
	if t := r.Header("X-API-Token"); issued[t] != "" {
		return t, nil
	}
	return "", nil
}

// plan names the plan of a request's token: pro tokens get 100 a minute, internal ones
// are unlimited, others the limit's own 10 a minute. It is looked up, never read from the
// token's text, which the client chooses.
func plan(r core.Request) string { return issued[r.Header("X-API-Token")] }

// planned reports whether a request is on /api/data with an issued token: its plan's
// limit is its whole limit there (100 a minute for pro tokens, none for internal ones),
// which the router-wide limit must not cap.
func planned(r core.Request) bool { return r.Route() == "/api/data" && plan(r) != "" }

// plans are the policies of the plans other than the free one.
var plans = map[string]string{"pro": "100/1m", "internal": "unlimited"}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	srv := newServer(*addr, newRouter())
	log.Printf("listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}

// newServer serves h on addr with a bound on each stage of a connection: a client that
// sends its request slowly, or idles on a kept-alive connection, would otherwise hold it
// as long as it likes, and a limit only sees a request once it is read.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
}

// tooMany refuses an API request in JSON, as API clients expect. The limit has already set
// Retry-After and the RateLimit fields; the body repeats the wait for clients that read
// only the body.
func tooMany(w http.ResponseWriter, r *http.Request, d core.Decision) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":"too many requests","retry_after":%s}`+"\n", w.Header().Get("Retry-After"))
}
