package fiberlimit_test

import (
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// TestProxyHeaderWithAPortIsTheClient: a trusted proxy that writes its client's address
// with a port ("203.0.113.5:4711", "[2001:db8::1]:443"), as some do in X-Real-IP, names
// that client, as it does for core and the Fiber v3 adapter: the address with and without
// a port share one bucket, and another client's is its own, not the proxy's.
func TestProxyHeaderWithAPortIsTheClient(t *testing.T) {
	app := fiber.New(fiber.Config{EnableTrustedProxyCheck: true, TrustedProxies: []string{"192.0.2.0/24"}, ProxyHeader: "X-Real-IP"})
	app.Get("/a", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil))), func(c *fiber.Ctx) error { return c.SendString("ok") })
	send := serve(app)
	for i, c := range []struct {
		client string
		status int
	}{
		{"203.0.113.5:4711", 200},
		{"203.0.113.5", 429}, // the same client
		{"203.0.113.6:1", 200},
		{"[2001:db8::1]:443", 200},
		{"2001:db8::1", 429},
	} {
		r := send(adaptertest.Request{Path: "/a", Remote: "192.0.2.10:1", Header: adaptertest.H("X-Real-IP", c.client)})
		if r.Status != c.status {
			t.Errorf("request %d, X-Real-IP %q: status %d, want %d", i+1, c.client, r.Status, c.status)
		}
	}
}
