package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// registering returns what registering the limit with do panicked with, "" for nothing.
func registering(do func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	do()
	return ""
}

// A nil handler is refused where it is wrapped: the wrapper is not nil, so ServeMux took
// it, and every admitted request then panicked.
func TestNilHandlerIsRefusedAtRegistration(t *testing.T) {
	msg := registering(func() {
		http.NewServeMux().Handle("GET /x", nethttp.Limit(3, time.Minute)(nil))
	})
	if !strings.Contains(msg, "nil http.Handler") {
		t.Errorf("Limit(...)(nil): panicked %q; want the nil handler refused, by name", msg)
	}
}

// WithPattern(nil) is refused as WithMux(nil) is, rather than ignored.
func TestWithPatternNilIsRefusedAtRegistration(t *testing.T) {
	if msg := registering(func() { nethttp.Limit(3, time.Minute, nethttp.WithPattern(nil)) }); !strings.Contains(msg, "WithPattern(nil)") {
		t.Errorf("Limit with WithPattern(nil): panicked %q; want WithPattern(nil) refused", msg)
	}
	if _, err := nethttp.New("3/1m", nethttp.WithPattern(nil)); err == nil || !strings.Contains(err.Error(), "WithPattern(nil)") {
		t.Errorf("New with WithPattern(nil): %v; want WithPattern(nil) refused", err)
	}
}

// net/http has no framework client IP: an application that meant to trust its proxy with
// core.WithClientIPFromFramework would have every request counted against the proxy's
// address. It is refused, pointing to core.WithTrustedProxies.
func TestClientIPFromFrameworkIsRefused(t *testing.T) {
	_, err := nethttp.New("3/1m", core.WithClientIPFromFramework())
	if err == nil || !strings.Contains(err.Error(), "WithTrustedProxies") || !strings.Contains(err.Error(), "registration_test.go") {
		t.Errorf("New with WithClientIPFromFramework: %v; want it refused, naming WithTrustedProxies and the line", err)
	}
	if msg := registering(func() { nethttp.Limit(3, time.Minute, core.WithClientIPFromFramework()) }); !strings.Contains(msg, "WithClientIPFromFramework") {
		t.Errorf("Limit with WithClientIPFromFramework: panicked %q; want it refused", msg)
	}
}

// Under WithMux the limit keys by the pattern the request will match; the key, skip, cost
// and tier functions see that route too, though r.Pattern is not set before routing.
func TestRouteSeenByFunctionsUnderWithMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var seen []string
	h := nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(mux),
		core.WithSkip(func(r core.Request) bool { seen = append(seen, r.Route()); return false }))(mux)
	for _, path := range []string{"/user/1", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	if want := []string{"GET /user/{id}", ""}; !slices.Equal(seen, want) {
		t.Errorf("core.Request.Route() under WithMux for /user/1 and /nowhere: %q, want %q", seen, want)
	}
}
