package nethttp_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// warnLog collects what a limit's error hook is given.
type warnLog struct {
	mu   sync.Mutex
	errs []string
}

func (w *warnLog) hook(_ context.Context, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err.Error())
}

func (w *warnLog) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errs...)
}

// twoRoutes is a ServeMux with GET /a and GET /b.
func twoRoutes() *http.ServeMux {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle("GET /a", ok)
	mux.Handle("GET /b", ok)
	return mux
}

// statuses sends GET path to h from one client and returns the statuses.
func statuses(h http.Handler, paths ...string) []int {
	var got []int
	for _, p := range paths {
		req := httptest.NewRequest(http.MethodGet, p, nil)
		req.RemoteAddr = "192.0.2.9:5555"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got = append(got, rec.Code)
	}
	return got
}

// TestLimitAroundAMuxWithoutWithMuxWarnsOnce: limit(mux) without WithMux decides before
// the mux routes, so every route shares one bucket per client (GET /b refused after one
// GET /a) and nothing said so. The request comes back with r.Pattern set by the mux: the
// limit warns, once, naming the pattern and the fix; its decisions stay as they were.
func TestLimitAroundAMuxWithoutWithMuxWarnsOnce(t *testing.T) {
	var log warnLog
	mux := twoRoutes()
	limit := nethttp.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithErrorHook(log.hook))
	h := limit(mux)
	if got, want := statuses(h, "/a", "/b", "/a"), []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v: one bucket for every route, warned or not", got, want)
	}
	// The same limit around another handler that routes, for another client: still once
	// for the limit.
	req := httptest.NewRequest(http.MethodGet, "/b", nil)
	req.RemoteAddr = "192.0.2.10:5555"
	rec := httptest.NewRecorder()
	limit(twoRoutes()).ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("another client: status %d, want 200", rec.Code)
	}
	errs := log.got()
	if len(errs) != 1 {
		t.Fatalf("%d warnings, want 1: %q", len(errs), errs)
	}
	want := `reqlimit: warning: limit 2/1m decided a request before routing, with no route, and the router then ` +
		`matched it to "GET /a": every route shares one bucket per client. Fix: nethttp.WithMux(mux) for a limit ` +
		`around a ServeMux (limit(mux)), chilimit.Limit for chi's r.Use, or nethttp.WithPattern for another router; ` +
		`or core.WithScope(name) if one bucket for every route is meant. Warned once per limit; ` +
		`core.WithWarnings(false) turns warnings off`
	if errs[0] != want {
		t.Errorf("warning %q,\nwant %q", errs[0], want)
	}
}

// TestUnroutedWarningQuietWhenRight: no warning where the limit knows the route (WithMux;
// mounted on a route), where one bucket for all routes is said (WithScope), where nothing
// was routed (a 404), or with warnings off.
func TestUnroutedWarningQuietWhenRight(t *testing.T) {
	mem := func() core.Option { return core.WithStore(core.NewMemoryStore(nil)) }
	var log warnLog
	hook := core.WithErrorHook(log.hook)

	mux := twoRoutes()
	statuses(nethttp.Limit(1, time.Minute, mem(), hook, nethttp.WithMux(mux))(mux), "/a", "/b", "/nowhere")

	perRoute := http.NewServeMux()
	perRoute.Handle("GET /a", nethttp.Limit(1, time.Minute, mem(), hook)(http.NotFoundHandler()))
	statuses(perRoute, "/a", "/a")

	mux = twoRoutes()
	statuses(nethttp.Limit(1, time.Minute, mem(), hook, core.WithScope("site"))(mux), "/a", "/b")

	mux = twoRoutes()
	statuses(nethttp.Limit(5, time.Minute, mem(), hook)(mux), "/nowhere", "/else")

	mux = twoRoutes()
	statuses(nethttp.Limit(1, time.Minute, mem(), hook, core.WithWarnings(false))(mux), "/a", "/b")

	if errs := log.got(); len(errs) != 0 {
		t.Errorf("warned %q, want nothing", errs)
	}
}

// TestUnroutedWarningGoesToSlogWithoutAHook: one slog line at level Warn.
func TestUnroutedWarningGoesToSlogWithoutAHook(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	mux := twoRoutes()
	statuses(nethttp.Limit(10, time.Minute, core.WithStore(core.NewMemoryStore(nil)))(mux), "/a", "/b", "/a")
	if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "nethttp.WithMux(mux)") {
		t.Errorf("slog got %q, want one Warn line naming the fix", out)
	}
}
