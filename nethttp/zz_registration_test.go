package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Review: a nil handler is accepted at registration (http.ServeMux refuses nil itself, but
// the limit's wrapper is not nil) and panics on the first admitted request, at request
// time. Expected: Limit(...)(nil) panics at registration naming the line, as other bad
// arguments do (or New's middleware reports it).
func TestZZNilHandlerFailsAtRegistration(t *testing.T) {
	registered := func() (ok bool) {
		defer func() { ok = recover() == nil }()
		mux := http.NewServeMux()
		mux.Handle("GET /x", nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)))(nil))
		registeredMux = mux
		return true
	}()
	if !registered {
		return // refused at registration: what we want
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("nil handler accepted at registration, then panicked at request time: %v", p)
		}
	}()
	registeredMux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
}

var registeredMux *http.ServeMux

// Review: with WithMux the limit knows the route pattern (it buckets by it), but the
// core.Request its key, skip, cost and tier functions get says Route() == "": the
// request's Pattern is not set yet. core.Request documents Route as "the matched pattern".
func TestZZRouteSeenByKeyFunctionsUnderWithMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var seen string
	h := nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(mux),
		core.WithSkip(func(r core.Request) bool { seen = r.Route(); return false }))(mux)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/user/1", nil))
	if seen != "GET /user/{id}" {
		t.Errorf("core.Request.Route() under WithMux = %q, want %q (the pattern the limit buckets by)", seen, "GET /user/{id}")
	}
}

// Review: grpclimit.New refuses core.WithClientIPFromFramework ("gRPC has no framework
// client IP; use core.WithTrustedProxies"), but net/http, which has no framework client IP
// either, accepts it and silently keys by the peer: an application that meant to trust its
// proxy this way counts every request against the proxy's address.
func TestZZClientIPFromFrameworkIsRefused(t *testing.T) {
	if _, err := nethttp.New("3/1m", core.WithStore(core.NewMemoryStore(nil)), core.WithClientIPFromFramework()); err == nil {
		t.Error("nethttp.New accepted core.WithClientIPFromFramework, which it ignores; want the error grpclimit gives")
	}
}
