package ginlimit_test

// The trusted-proxy recipe of docs/operations.md, verbatim (internal/repotest holds the two
// in step), driven through real requests: a recipe that compiles but lets a client pick its
// own key is the bug these tests are for.

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// Proxies in 10.0.0.0/8 set X-Real-IP.
func ginRouter(h gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
		panic(err)
	}
	// Only the header the proxies set: by default Gin reads X-Forwarded-For first.
	r.RemoteIPHeaders = []string{"X-Real-IP"}
	r.GET("/user/test", ginlimit.Limit(3, time.Minute, core.WithClientIPFromFramework()), h)
	return r
}

// ginRouterForwardedFor is ginRouter with the change the docs give for proxies that
// append to X-Forwarded-For.
func ginRouterForwardedFor(h gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
		panic(err)
	}
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	r.GET("/user/test", ginlimit.Limit(3, time.Minute, core.WithClientIPFromFramework()), h)
	return r
}

func TestGinRecipeIgnoresForgedHeadersFromUntrustedPeers(t *testing.T) {
	adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(ginRouter(ginOK)))
	adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(ginRouterForwardedFor(ginOK)))
}

// Gin's default RemoteIPHeaders reads X-Forwarded-For before X-Real-IP, and a proxy that
// sets X-Real-IP passes the client's X-Forwarded-For on: every request here forges one.
func TestGinRecipeKeysClientsBehindRealIPProxy(t *testing.T) {
	adaptertest.ExpectClientsApart(t, adaptertest.ServeHTTP(ginRouter(ginOK)), adaptertest.RealIP)
}

func TestGinRecipeForwardedForKeysClientsBehindProxies(t *testing.T) {
	adaptertest.ExpectClientsApart(t, adaptertest.ServeHTTP(ginRouterForwardedFor(ginOK)), adaptertest.ForwardedFor)
}

func ginOK(c *gin.Context) { c.String(http.StatusOK, "ok") }
