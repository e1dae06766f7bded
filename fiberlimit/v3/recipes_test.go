package fiberlimit_test

// The trusted-proxy recipes for Fiber v3, written as docs/operations.md writes them, so
// that they can be copied there verbatim (internal/repotest then holds the two in step),
// driven through real requests: a recipe that compiles but lets a client pick its own key
// is the bug these tests are for. Their names differ from the Fiber v2 recipes', which
// share their text in part.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// Proxies in 10.0.0.0/8 set X-Real-IP.
func fiber3App(h fiber.Handler) *fiber.App {
	app := fiber.New(fiber.Config{
		ProxyHeader:      "X-Real-IP",
		TrustProxy:       true,
		TrustProxyConfig: fiber.TrustProxyConfig{Proxies: []string{"10.0.0.0/8"}},
	})
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), h)
	return app
}

// Proxies in 10.0.0.0/8 append to X-Forwarded-For; Fiber's trust settings name them.
func fiber3AppForwardedFor(h fiber.Handler) *fiber.App {
	app := fiber.New(fiber.Config{
		ProxyHeader:      fiber.HeaderXForwardedFor,
		TrustProxy:       true,
		TrustProxyConfig: fiber.TrustProxyConfig{Proxies: []string{"10.0.0.0/8"}},
	})
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), h)
	return app
}

// Proxies in 10.0.0.0/8 append to X-Forwarded-For; reqlimit's option names them.
func fiber3AppTrustedProxies(h fiber.Handler) *fiber.App {
	app := fiber.New()
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute, core.WithTrustedProxies("10.0.0.0/8")), h)
	return app
}

// fiber3Recipes are the recipes above, each on a fresh app.
func fiber3Recipes() []adaptertest.Recipe {
	return []adaptertest.Recipe{
		{Kind: adaptertest.RealIP, Send: serveConns(fiber3App(fiberOK))},
		{Kind: adaptertest.ForwardedFor, Send: serveConns(fiber3AppForwardedFor(fiberOK))},
		{Kind: adaptertest.ForwardedFor, Send: serveConns(fiber3AppTrustedProxies(fiberOK))},
	}
}

func TestFiber3RecipesIgnoreForgedHeadersFromUntrustedPeers(t *testing.T) {
	adaptertest.ExpectRecipesIgnoreForgeries(t, fiber3Recipes()...)
}

func TestFiber3RecipesKeyClientsBehindProxies(t *testing.T) {
	adaptertest.ExpectRecipesKeyClientsApart(t, fiber3Recipes()...)
}

func fiberOK(c fiber.Ctx) error { return c.SendString("ok") }

// serveConns serves each request on a connection of its own from the request's peer,
// through fasthttp's own parsing, as app.Test does; app.Test cannot choose the peer, and
// trust depends on it. The response has the status and headers, no body.
func serveConns(app *fiber.App) func(adaptertest.Request) adaptertest.Response {
	app.Handler() // builds the routes, as serving does
	return func(r adaptertest.Request) adaptertest.Response {
		var raw strings.Builder
		fmt.Fprintf(&raw, "GET %s HTTP/1.1\r\nHost: example.com\r\n", r.Path)
		for i := 0; i+1 < len(r.Header); i += 2 {
			fmt.Fprintf(&raw, "%s: %s\r\n", r.Header[i], r.Header[i+1])
		}
		raw.WriteString("Connection: close\r\n\r\n")
		ap := netip.MustParseAddrPort(r.RemoteAddr())
		c := &peerConn{in: strings.NewReader(raw.String()), peer: &net.TCPAddr{IP: ap.Addr().AsSlice(), Port: int(ap.Port())}}
		if err := app.Server().ServeConn(c); err != nil {
			panic(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(&c.out), nil)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return adaptertest.Response{Status: resp.StatusCode, Header: resp.Header}
	}
}

// peerConn is one client connection, from peer.
type peerConn struct {
	in   *strings.Reader
	out  bytes.Buffer
	peer net.Addr
}

func (c *peerConn) Read(b []byte) (int, error)       { return c.in.Read(b) }
func (c *peerConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *peerConn) Close() error                     { return nil }
func (c *peerConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 8080} }
func (c *peerConn) RemoteAddr() net.Addr             { return c.peer }
func (c *peerConn) SetDeadline(time.Time) error      { return nil }
func (c *peerConn) SetReadDeadline(time.Time) error  { return nil }
func (c *peerConn) SetWriteDeadline(time.Time) error { return nil }
