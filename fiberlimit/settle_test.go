package fiberlimit_test

import (
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// Under core.WithCountWhen a request is settled with the status its client gets, or, when
// that cannot be known, counts.

// serveLoopback serves app on a loopback listener until the test ends and returns its address.
func serveLoopback(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	return ln.Addr().String()
}

// Fiber v2 has no c.Drop(); a handler drops a bad attempt by closing fasthttp's connection.
// The client gets no status: as for a hijacked connection, the request counts, under
// core.Failed too.
func TestConnCloseCountsUnderFailed(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	var calls atomic.Int32
	app.Post("/login", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c *fiber.Ctx) error {
			calls.Add(1)
			return c.Context().Conn().Close() // bad credentials: close without answering
		})
	addr := serveLoopback(t, app)
	if got := adaptertest.StatusAt(t, addr, "POST", "/login"); got != "" {
		t.Fatalf("request 1: status %q, want no response (connection closed)", got)
	}
	if got := adaptertest.StatusAt(t, addr, "POST", "/login"); got != "429" {
		t.Fatalf("request 2: status %q (handler ran %d times), want 429: a request answered with no status must count", got, calls.Load())
	}
}

// fasthttp's RequestCtx.TimeoutError makes the server send 408 whatever the handler's
// response holds: under core.Failed, a login answered 408 counts.
func TestTimeoutErrorCountsUnderFailed(t *testing.T) {
	app := fiber.New()
	app.Post("/login", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c *fiber.Ctx) error {
			c.Context().TimeoutError("login timed out") // the client is sent 408
			return nil
		})
	for i, want := range []int{408, 429} {
		resp, err := app.Test(httptest.NewRequest("POST", "/login", nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
