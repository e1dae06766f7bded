package ginlimit_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// Until engine.SetTrustedProxies is called, Gin's c.ClientIP() believes X-Forwarded-For and
// X-Real-IP from any client, so WithClientIPFromFramework must not follow it: the peer's
// address is the key, and the limit says why, once, naming the fix. An engine that trusts
// only its proxies is followed, without a word.
func TestEngineThatTrustsEveryProxyIsNotFollowed(t *testing.T) {
	for _, trusted := range [][]string{nil, {"10.0.0.0/8"}} {
		var seen []string
		r := gin.New() // trusts 0.0.0.0/0 and ::/0
		if trusted != nil {
			if err := r.SetTrustedProxies(trusted); err != nil {
				t.Fatal(err)
			}
			r.RemoteIPHeaders = []string{"X-Real-IP"}
		}
		r.GET(adaptertest.RecipePath, ginlimit.Limit(3, time.Minute, core.WithClientIPFromFramework(),
			core.WithErrorHook(func(_ context.Context, err error) { seen = append(seen, err.Error()) })), ginOK)
		send := adaptertest.ServeHTTP(r)
		adaptertest.ExpectForgeriesIgnored(t, send)
		if trusted == nil {
			if len(seen) != 1 || !strings.Contains(seen[0], "engine.SetTrustedProxies") || !strings.Contains(seen[0], adaptertest.RecipePath) {
				t.Errorf("trusting every proxy: warnings %q; want one, naming engine.SetTrustedProxies and the route", seen)
			}
			continue
		}
		adaptertest.ExpectClientsApart(t, send, adaptertest.RealIP)
		if len(seen) != 0 {
			t.Errorf("trusting %v: warnings %q; want none", trusted, seen)
		}
	}
}

// Over a unix socket Gin trusts the peer, which only a process on the host can be: the
// proxy. There its c.ClientIP() is followed whatever the engine trusts over TCP.
func TestEngineOnAUnixSocketIsFollowed(t *testing.T) {
	var seen []string
	r := gin.New()
	r.GET(adaptertest.RecipePath, ginlimit.Limit(3, time.Minute, core.WithClientIPFromFramework(),
		core.WithErrorHook(func(_ context.Context, err error) { seen = append(seen, err.Error()) })), ginOK)
	unix := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"})
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		for i := range 4 {
			req := httptest.NewRequestWithContext(unix, http.MethodGet, adaptertest.RecipePath, nil)
			req.RemoteAddr = "@"
			req.Header.Set("X-Forwarded-For", client)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 3]; w.Code != want {
				t.Errorf("client %s, request %d: status %d, want %d", client, i+1, w.Code, want)
			}
		}
	}
	if len(seen) != 0 {
		t.Errorf("warnings %q; want none", seen)
	}
}
