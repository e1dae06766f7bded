package nethttp_test

// The trusted-proxy recipes of docs/operations.md, verbatim (internal/repotest holds the
// two in step), driven through real requests: a recipe that compiles but lets a client
// pick its own key is the bug these tests are for.

import (
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Proxies in 10.0.0.0/8 append to X-Forwarded-For.
func forwardedForMux(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, core.WithTrustedProxies("10.0.0.0/8"))(h))
	return mux
}

// Proxies in 10.0.0.0/8 set X-Real-IP.
func realIPMux(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute,
		core.WithTrustedProxies("10.0.0.0/8"), core.WithForwardedHeader("X-Real-IP"))(h))
	return mux
}

// httpRecipes are the recipes above, each on a fresh mux: adaptertest sends every request
// from the peer it chooses.
func httpRecipes() []adaptertest.Recipe {
	return []adaptertest.Recipe{
		{Kind: adaptertest.ForwardedFor, Send: adaptertest.ServeHTTP(forwardedForMux(httpOK))},
		{Kind: adaptertest.RealIP, Send: adaptertest.ServeHTTP(realIPMux(httpOK))},
	}
}

func TestNetHTTPRecipesIgnoreForgedHeadersFromUntrustedPeers(t *testing.T) {
	adaptertest.ExpectRecipesIgnoreForgeries(t, httpRecipes()...)
}

// Behind a proxy that sets X-Real-IP, every request forges X-Forwarded-For: reading it
// too, even as a fallback, would let the client pick its key.
func TestNetHTTPRecipesKeyClientsBehindProxies(t *testing.T) {
	adaptertest.ExpectRecipesKeyClientsApart(t, httpRecipes()...)
}

var httpOK = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
