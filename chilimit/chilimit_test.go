package chilimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/reqlimit/reqlimit/chilimit"
	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

// serve sends each request (method and path) to h from one client and returns the statuses.
func serve(h http.Handler, reqs ...string) []int {
	var got []int
	for _, mp := range reqs {
		method, path, _ := strings.Cut(mp, " ")
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "192.0.2.9:5555"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got = append(got, rec.Code)
	}
	return got
}

// mem is a store of the test's own.
func mem() core.Option { return core.WithStore(core.NewMemoryStore(nil)) }

// TestEachRouteHasItsOwnBucket: one line in r.Use, and each route chi matches has a
// bucket of its own per client; paths of one pattern share it; requests that match no
// route share one. A route is chi's pattern, which names no method: GET and POST
// /users/{id} share one. Under nethttp.Limit in r.Use, the same router counted every
// route in one bucket.
func TestEachRouteHasItsOwnBucket(t *testing.T) {
	r := chi.NewRouter()
	r.Use(chilimit.Limit(1, time.Minute, mem()))
	r.Get("/a", ok)
	r.Get("/b", ok)
	r.Get("/users/{id}", ok)
	r.Post("/users/{id}", ok)

	got := serve(r, "GET /a", "GET /b", "GET /a", "GET /users/1", "GET /users/2", "POST /users/1",
		"GET /nowhere", "GET /elsewhere", "GET /users/a%2Fb")
	want := []int{200, 200, 429, 200, 429, 429, 404, 429, 429}
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

// TestMountedAndStrippedPathsKeyByTheRouteChiRuns: mounted in a sub-router's Use, the
// limit keys by the whole pattern; behind middleware that changes the path chi routes on
// (StripSlashes), by the route chi runs for the changed path.
func TestMountedAndStrippedPathsKeyByTheRouteChiRuns(t *testing.T) {
	var seen sync.Map // path → the route the limit's key function saw
	key := core.WithKey(func(r core.Request) (string, error) { seen.Store(r.Path(), r.Route()); return "", nil })

	api := chi.NewRouter()
	api.Use(chilimit.Limit(1, time.Minute, mem(), key))
	api.Get("/x", ok)
	api.Get("/y/{id}", ok)
	r := chi.NewRouter()
	r.Use(middleware.StripSlashes)
	r.Use(chilimit.Limit(1, time.Minute, mem()))
	r.Get("/a", ok)
	r.Get("/b", ok)
	r.Mount("/api", api)

	got := serve(r, "GET /api/x", "GET /api/y/1", "GET /api/x", "GET /a/", "GET /b", "GET /a")
	// The router-wide limit counts /api/x and /api/y/{id} apart too: its 429 is the third.
	want := []int{200, 200, 429, 200, 200, 429}
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	for path, route := range map[string]string{"/api/x": "/api/x", "/api/y/1": "/api/y/{id}"} {
		if r, _ := seen.Load(path); r != route {
			t.Errorf("%s: the sub-router's limit keyed by route %q, want %q", path, r, route)
		}
	}
}

// TestOneLine: mounting the limit on the whole router is one line of the application's,
// as the package doc shows it and this test file writes it.
func TestOneLine(t *testing.T) {
	src, err := os.ReadFile("chilimit_test.go")
	if err != nil {
		t.Fatal(err)
	}
	line := "\t" + "r.Use(chilimit.Limit(1, time.Minute, mem()))\n"
	if !strings.Contains(string(src), line) {
		t.Fatalf("no line %q in the test that proves it works", line)
	}
	doc, err := os.ReadFile("chilimit.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "//\tr.Use(chilimit.Limit(100, time.Minute))\n") {
		t.Errorf("the package doc does not show the one line")
	}
}

// TestNethttpLimitInUseWarnsOnChi: a nethttp limit in chi's r.Use, without WithPattern,
// counts every route in one bucket; chi sets r.Pattern once it has routed, and the limit
// warns once, naming chilimit. A chilimit limit says nothing.
func TestNethttpLimitInUseWarnsOnChi(t *testing.T) {
	for _, plain := range []bool{true, false} {
		var mu sync.Mutex
		var errs []string
		hook := core.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err.Error()); mu.Unlock() })
		r := chi.NewRouter()
		if plain {
			r.Use(nethttp.Limit(5, time.Minute, mem(), hook))
		} else {
			r.Use(chilimit.Limit(5, time.Minute, mem(), hook))
		}
		r.Get("/a", ok)
		r.Get("/b/{id}", ok)
		serve(r, "GET /a", "GET /b/1", "GET /a", "GET /nowhere")
		switch {
		case plain && (len(errs) != 1 || !strings.Contains(errs[0], `matched it to "/a"`) || !strings.Contains(errs[0], "chilimit.Limit")):
			t.Errorf("nethttp.Limit in r.Use: warnings %q, want one naming the route and chilimit.Limit", errs)
		case !plain && len(errs) != 0:
			t.Errorf("chilimit.Limit: warned %q, want nothing", errs)
		}
	}
}

// TestBadArgumentsNameTheApplicationsLine: a bad argument panics naming chilimit.Limit and
// the application's line; New returns the error.
func TestBadArgumentsNameTheApplicationsLine(t *testing.T) {
	func() {
		defer func() {
			msg, _ := recover().(string)
			if !strings.Contains(msg, "chilimit.Limit") || !strings.Contains(msg, "chilimit_test.go:") {
				t.Errorf("panic %q, want it to name chilimit.Limit and the test's line", msg)
			}
		}()
		chilimit.Limit(0, time.Minute)
	}()
	if _, err := chilimit.New("3/lightyear"); err == nil {
		t.Error(`New("3/lightyear"): no error`)
	}
}

// TestPatternIsWhatChiRoutes: an escaped slash in a parameter (chi routes on the escaped
// path), or a path that StripSlashes or CleanPath changed before the limit, still reaches
// /user/{id}, and counts in its bucket, not under /user/{id}/posts's nor in the bucket of
// requests matching no route: one request from a client reaches it in the minute.
func TestPatternIsWhatChiRoutes(t *testing.T) {
	for name, pre := range map[string][]func(http.Handler) http.Handler{
		"escaped":       nil,
		"strip-slashes": {middleware.StripSlashes},
		"clean-path":    {middleware.CleanPath},
	} {
		r := chi.NewRouter()
		r.Use(pre...)
		r.Use(chilimit.Limit(1, time.Minute, mem()))
		reached := 0
		r.Get("/user/{id}", func(http.ResponseWriter, *http.Request) { reached++ })
		r.Get("/user/{id}/posts", ok)
		serve(r, "GET /user/1", "GET /user/2", "GET /user/a%2Fb", "GET /user/a%2Fposts", "GET /user/3/", "GET /user//4")
		if reached != 1 {
			t.Errorf("%s: GET /user/{id}, limited to 1 a minute per client, reached its handler %d times from one client", name, reached)
		}
	}
}

// TestSubRouterRouteKeysRoutesApart: in the Use of a sub-router made with r.Route, where
// the parent has set r.Pattern to the mount's "/api/*", each of its routes has a bucket.
func TestSubRouterRouteKeysRoutesApart(t *testing.T) {
	r := chi.NewRouter()
	r.Route("/api", func(sub chi.Router) {
		sub.Use(chilimit.Limit(1, time.Minute, mem()))
		sub.Get("/a", ok)
		sub.Get("/b", ok)
	})
	if got, want := serve(r, "GET /api/a", "GET /api/b", "GET /api/a"), []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}
