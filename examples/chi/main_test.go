package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/exampletest"
	"github.com/reqlimit/reqlimit/nethttp"
)

func TestLimits(t *testing.T) { exampletest.Check(t, exampletest.HTTP(newRouter()), issue) }

// TestMountings holds chi's three ways to mount a limit to docs/operations.md's table ("Where a limit is mounted"): r.With keys
// by route pattern; r.Use counts every route in one bucket per client (the route is not
// known before routing), unless nethttp.WithPattern asks the router first.
func TestMountings(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }
	build := map[string]func(limit func(...core.Option) func(http.Handler) http.Handler) *chi.Mux{
		"use": func(limit func(...core.Option) func(http.Handler) http.Handler) *chi.Mux {
			r := chi.NewRouter()
			r.Use(limit())
			r.Get("/user/{id}", ok)
			r.Get("/other", ok)
			return r
		},
		"use-with-pattern": func(limit func(...core.Option) func(http.Handler) http.Handler) *chi.Mux {
			r := chi.NewRouter()
			r.Use(limit(nethttp.WithPattern(chiPattern(r))))
			r.Get("/user/{id}", ok)
			r.Get("/other", ok)
			return r
		},
		"with": func(limit func(...core.Option) func(http.Handler) http.Handler) *chi.Mux {
			r := chi.NewRouter()
			r.With(limit()).Get("/user/{id}", ok)
			r.With(limit()).Get("/other", ok)
			return r
		},
	}
	want := map[string][]int{
		//                 /user/1 /user/2 /user/3 /other /nowhere /nowhere2
		"use":              {200, 200, 429, 429, 429, 429},
		"use-with-pattern": {200, 200, 429, 200, 404, 404},
		"with":             {200, 200, 429, 200, 404, 404},
	}
	for name, b := range build {
		t.Run(name, func(t *testing.T) {
			store := core.WithStore(core.NewMemoryStore(nil))
			r := b(func(opts ...core.Option) func(http.Handler) http.Handler {
				return nethttp.Limit(2, time.Minute, append(opts, store)...)
			})
			for i, path := range []string{"/user/1", "/user/2", "/user/3", "/other", "/nowhere", "/nowhere2"} {
				req := httptest.NewRequest("GET", path, nil)
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				if w.Code != want[name][i] {
					t.Errorf("%s: status %d, want %d", path, w.Code, want[name][i])
				}
			}
		})
	}
}

// issue adds token to the tokens the application issued.
func issue(token, plan string) { issued[token] = plan }

// TestPatternIsWhatChiRoutes holds chiPattern to the path chi routes on: an escaped slash
// in a parameter (chi routes on the escaped path), or a trailing slash that StripSlashes
// took away before the limit, still reaches /user/{id} and must count in its bucket,
// rather than under /user/{id}/posts's or in the bucket of requests matching no route.
func TestPatternIsWhatChiRoutes(t *testing.T) {
	for name, pre := range map[string][]func(http.Handler) http.Handler{
		"escaped":       nil,
		"strip-slashes": {middleware.StripSlashes},
		"clean-path":    {middleware.CleanPath},
	} {
		t.Run(name, func(t *testing.T) {
			r := chi.NewRouter()
			r.Use(pre...)
			r.Use(nethttp.Limit(1, time.Minute, nethttp.WithPattern(chiPattern(r)), core.WithStore(core.NewMemoryStore(nil))))
			reached := 0
			r.Get("/user/{id}", func(w http.ResponseWriter, _ *http.Request) { reached++ })
			r.Get("/user/{id}/posts", func(w http.ResponseWriter, _ *http.Request) {})
			for _, path := range []string{"/user/1", "/user/2", "/user/a%2Fb", "/user/a%2Fposts", "/user/3/", "/user//4"} {
				w := httptest.NewRecorder()
				req := httptest.NewRequest("GET", path, nil)
				req.RemoteAddr = "192.0.2.1:1234"
				r.ServeHTTP(w, req)
				t.Logf("GET %s: %d", path, w.Code)
			}
			if reached != 1 {
				t.Errorf("GET /user/{id}, limited to 1 a minute per client, reached its handler %d times from one client", reached)
			}
		})
	}
}

// TestRealIPBeforeTheLimit holds the warning in docs/operations.md: behind chi's
// middleware.RealIP, which believes any client's forwarded headers, each forged header is
// a fresh quota; a limit before it keys by the peer.
func TestRealIPBeforeTheLimit(t *testing.T) {
	admitted := func(middlewares ...func(http.Handler) http.Handler) int {
		r := chi.NewRouter()
		r.Use(middlewares...)
		r.Get("/user/{id}", func(http.ResponseWriter, *http.Request) {})
		n := 0
		for i := range 5 {
			req := httptest.NewRequest("GET", "/user/1", nil)
			req.RemoteAddr = "192.0.2.1:1234"
			req.Header.Set("X-Real-IP", "203.0.113."+strconv.Itoa(i+1))
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code == http.StatusOK {
				n++
			}
		}
		return n
	}
	limit := func() func(http.Handler) http.Handler {
		return nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)))
	}
	//lint:ignore SA1019 the test shows what chi's deprecated RealIP costs a limit after it
	if n := admitted(middleware.RealIP, limit()); n != 5 {
		t.Errorf("limit behind RealIP: %d of 5 requests with forged X-Real-IP admitted by 1/1m; the docs say each buys a quota", n)
	}
	//lint:ignore SA1019 the test shows that a limit before RealIP keys by the peer
	if n := admitted(limit(), middleware.RealIP); n != 1 {
		t.Errorf("limit before RealIP: %d of 5 requests with forged X-Real-IP admitted by 1/1m, want 1", n)
	}
}

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }

// A limit in a chi sub-router's r.Use, given WithPattern(chiPattern(sub)), keys each of the
// sub-router's routes apart, although the parent router has set r.Pattern to the mount's
// pattern ("/api/*") when the sub-router's middleware runs.
func TestSubRouterUseWithPatternKeysRoutesApart(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }
	r := chi.NewRouter()
	r.Route("/api", func(sub chi.Router) {
		sub.Use(nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithPattern(chiPattern(sub))))
		sub.Get("/a", ok)
		sub.Get("/b", ok)
	})
	var got []int
	for _, path := range []string{"/api/a", "/api/b", "/api/a"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.10:5555"
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		got = append(got, rec.Code)
	}
	if want := []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v: GET /api/b was counted in the mount's bucket \"/api/*\" with GET /api/a", got, want)
	}
}
