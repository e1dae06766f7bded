package echolimit_test

// echolimit's trusted-proxy recipes of docs/operations.md, written for Echo v5: the same
// code as for v4 but for the import, driven through real requests. A recipe that
// compiles but lets a client pick its own key is the bug these tests are for.

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// echo5ProxyTrust trusts the proxies in 10.0.0.0/8 and no one else: Echo's extractors also
// trust every loopback, private and link-local peer unless told not to.
func echo5ProxyTrust() []echo.TrustOption {
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
func echo5Server(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromXFFHeader(echo5ProxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// Proxies set X-Real-IP.
func echo5ServerRealIP(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromRealIPHeader(echo5ProxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// echoRecipes are the recipes above, each on a fresh Echo.
func echoRecipes() []adaptertest.Recipe {
	return []adaptertest.Recipe{
		{Kind: adaptertest.ForwardedFor, Send: adaptertest.ServeHTTP(echo5Server(echoOK))},
		{Kind: adaptertest.RealIP, Send: adaptertest.ServeHTTP(echo5ServerRealIP(echoOK))},
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

func echoOK(c *echo.Context) error { return c.String(http.StatusOK, "ok") }
