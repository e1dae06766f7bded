package fiberlimit_test

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

func TestTrailerBuysNoBucket(t *testing.T) {
	adaptertest.TrailerForgery(t, func(t *testing.T, ln net.Listener, proxyHeader string, opts []core.Option) {
		cfg := fiber.Config{DisableStartupMessage: true}
		if proxyHeader != "" {
			cfg.EnableTrustedProxyCheck, cfg.TrustedProxies, cfg.ProxyHeader = true, []string{"127.0.0.0/8"}, proxyHeader
		}
		app := fiber.New(cfg)
		app.Post("/t", fiberlimit.Limit(1, time.Minute, opts...), func(c *fiber.Ctx) error { return c.SendString("ok") })
		go app.Listener(ln)
		t.Cleanup(func() { app.Shutdown() })
	})
}
