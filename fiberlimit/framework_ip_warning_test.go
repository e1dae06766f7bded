package fiberlimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// With ProxyHeader X-Forwarded-For, c.IP() is the chain's leftmost entry, which the client
// writes, so core.WithClientIPFromFramework is not followed: the limit says so, once,
// naming the fix. With a single-address ProxyHeader it is followed, without a word.
func TestChainProxyHeaderWithTheOptInWarnsOnce(t *testing.T) {
	for _, header := range []string{fiber.HeaderXForwardedFor, "X-Real-IP"} {
		var warned []string
		hook := core.WithErrorHook(func(_ context.Context, err error) { warned = append(warned, err.Error()) })
		app := fiber.New(fiber.Config{ProxyHeader: header, EnableTrustedProxyCheck: true, TrustedProxies: []string{"10.0.0.0/8"}})
		app.Get("/user/test", fiberlimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithClientIPFromFramework(), hook), fiberOK)
		send := serveConns(app)
		for i := range 3 {
			send(adaptertest.Request{Path: "/user/test", Remote: "10.0.0.1:40000", Header: adaptertest.H(header, "198.51.100."+string(rune('1'+i)))})
		}
		chain := header == fiber.HeaderXForwardedFor
		switch {
		case chain && (len(warned) != 1 || !strings.Contains(warned[0], "WithTrustedProxies") || !strings.Contains(warned[0], "/user/test")):
			t.Errorf("ProxyHeader %s: warnings %q; want one, naming WithTrustedProxies and the route", header, warned)
		case !chain && len(warned) != 0:
			t.Errorf("ProxyHeader %s: warnings %q; want none", header, warned)
		}
	}
}
