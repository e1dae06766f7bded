package echolimit_test

// The trusted-proxy recipes of docs/operations.md, verbatim (internal/repotest holds the
// two in step), driven through real requests: a recipe that compiles but lets a client
// pick its own key is the bug these tests are for.

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// proxyTrust trusts the proxies in 10.0.0.0/8 and no one else: Echo's extractors also
// trust every loopback, private and link-local peer unless told not to.
func proxyTrust() []echo.TrustOption {
	_, proxies, err := net.ParseCIDR("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	return []echo.TrustOption{
		echo.TrustLoopback(false), echo.TrustPrivateNet(false), echo.TrustLinkLocal(false),
		echo.TrustIPRange(proxies),
	}
}

// Proxies append to X-Forwarded-For.
func echoServer(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromXFFHeader(proxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// Proxies set X-Real-IP.
func echoServerRealIP(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromRealIPHeader(proxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// echoRecipes are the recipes above, each on a fresh Echo.
func echoRecipes() []adaptertest.Recipe {
	return []adaptertest.Recipe{
		{Kind: adaptertest.ForwardedFor, Send: adaptertest.ServeHTTP(echoServer(echoOK))},
		{Kind: adaptertest.RealIP, Send: adaptertest.ServeHTTP(echoServerRealIP(echoOK))},
	}
}

// The private, loopback and link-local peers adaptertest sends from are the ones Echo
// would trust by default.
func TestEchoRecipesIgnoreForgedHeadersFromUntrustedPeers(t *testing.T) {
	adaptertest.ExpectRecipesIgnoreForgeries(t, echoRecipes()...)
}

func TestEchoRecipesKeyClientsBehindProxies(t *testing.T) {
	adaptertest.ExpectRecipesKeyClientsApart(t, echoRecipes()...)
}

func echoOK(c echo.Context) error { return c.String(http.StatusOK, "ok") }
