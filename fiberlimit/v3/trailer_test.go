package fiberlimit_test

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

func TestTrailerBuysNoBucket(t *testing.T) {
	adaptertest.TrailerForgery(t, func(t *testing.T, ln net.Listener, proxyHeader string, opts []core.Option) {
		var cfg fiber.Config
		if proxyHeader != "" {
			cfg = fiber.Config{TrustProxy: true, TrustProxyConfig: fiber.TrustProxyConfig{Loopback: true}, ProxyHeader: proxyHeader}
		}
		app := fiber.New(cfg)
		app.Post("/t", fiberlimit.Limit(1, time.Minute, opts...), func(c fiber.Ctx) error { return c.SendString("ok") })
		go app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true})
		t.Cleanup(func() { app.Shutdown() })
	})
}
