package fiberlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// TestPrivateClientOfATrustedProxyIsNoWarning: under docs/operations.md's Fiber v3
// recipes, a client in a private range that a trusted proxy names is keyed by its own
// address, as it should be. That is no untrusted proxy: the warning, whose fix would be to
// trust the client itself, must not be given. The connection's peer, a proxy Fiber's
// TrustProxyConfig trusts, is what the warning is about, never the client it named.
func TestPrivateClientOfATrustedProxyIsNoWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
	}{
		{"X-Real-IP", "X-Real-IP"},
		{"X-Forwarded-For", fiber.HeaderXForwardedFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warned []string
			hook := core.WithErrorHook(func(_ context.Context, err error) { warned = append(warned, err.Error()) })
			app := fiber.New(fiber.Config{
				ProxyHeader:      tc.header,
				TrustProxy:       true,
				TrustProxyConfig: fiber.TrustProxyConfig{Proxies: []string{"10.0.0.0/8"}},
			})
			app.Get("/user/test", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), hook), fiberOK)
			send := serveConns(app)
			// Two clients on the office network, each behind the proxy at 10.0.0.1, which
			// sets X-Real-IP and appends to X-Forwarded-For as nginx does.
			for _, client := range []string{"192.168.1.7", "192.168.1.8"} {
				r := send(adaptertest.Request{Path: "/user/test", Remote: "10.0.0.1:40000",
					Header: adaptertest.H("X-Real-IP", client, "X-Forwarded-For", client)})
				if r.Status != 200 {
					t.Errorf("client %s behind the trusted proxy: status %d, want 200 (a bucket of its own)", client, r.Status)
				}
			}
			if len(warned) != 0 {
				t.Errorf("warnings %q, want none: the peer is a trusted proxy", warned)
			}
		})
	}
}
