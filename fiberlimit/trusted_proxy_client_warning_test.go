package fiberlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// TestPrivateClientOfATrustedProxyIsNoWarning: under docs/operations.md's Fiber v2
// recipe (ProxyHeader X-Real-IP, EnableTrustedProxyCheck), a client in a private range
// that a trusted proxy names is keyed by its own address, as it should be. That is no
// untrusted proxy: the warning, whose fix would be to trust the client itself, must not
// be given.
func TestPrivateClientOfATrustedProxyIsNoWarning(t *testing.T) {
	var warned []string
	hook := core.WithErrorHook(func(_ context.Context, err error) { warned = append(warned, err.Error()) })
	app := fiber.New(fiber.Config{
		ProxyHeader:             "X-Real-IP",
		EnableTrustedProxyCheck: true,
		TrustedProxies:          []string{"10.0.0.0/8"},
	})
	app.Get("/user/test", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), hook), fiberOK)
	send := serveConns(app)
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
}
