package fiberlimit_test

import (
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
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
	go app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true})
	t.Cleanup(func() { app.Shutdown() })
	return ln.Addr().String()
}

// A login handler that answers a bad attempt with c.Drop() (Fiber's way to block a request
// without a response) sends the client no status at all: as for a hijacked connection, the
// request counts, under core.Failed too.
func TestDropCountsUnderFailed(t *testing.T) {
	app := fiber.New()
	var calls atomic.Int32
	app.Post("/login", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c fiber.Ctx) error {
			calls.Add(1)
			return c.Drop() // bad credentials: close without answering
		})
	addr := serveLoopback(t, app)
	if got := adaptertest.StatusAt(t, addr, "POST", "/login"); got != "" {
		t.Fatalf("request 1: status %q, want no response (dropped)", got)
	}
	if got := adaptertest.StatusAt(t, addr, "POST", "/login"); got != "429" {
		t.Fatalf("request 2: status %q (handler ran %d times), want 429: a dropped request has no status and must count", got, calls.Load())
	}
}

// c.End() sends the response as it stands and closes the connection: what the handler does
// afterwards never reaches the client. A handler that serves its answer, ends it, then
// fails in a later step and returns the error had its client served 200: under
// core.Succeeded the request must not give its slot back for the error's 500.
func TestEndThenErrorCountsUnderSucceeded(t *testing.T) {
	app := fiber.New()
	app.Post("/login", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Succeeded)),
		func(c fiber.Ctx) error {
			if err := c.SendString("the report"); err != nil {
				return err
			}
			if err := c.End(); err != nil { // the client now has its 200
				return err
			}
			return fiber.NewError(fiber.StatusInternalServerError, "audit log write failed")
		})
	addr := serveLoopback(t, app)
	for i, want := range []string{"200", "429"} {
		if got := adaptertest.StatusAt(t, addr, "POST", "/login"); got != want {
			t.Fatalf("request %d: status %q, want %s: the client was served 200 by c.End(), a success that counts", i+1, got, want)
		}
	}
}

// fasthttp's RequestCtx.TimeoutError makes the server send 408 whatever the handler's
// response holds: under core.Failed, a login answered 408 counts.
func TestTimeoutErrorCountsUnderFailed(t *testing.T) {
	app := fiber.New()
	app.Post("/login", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c fiber.Ctx) error {
			c.RequestCtx().TimeoutError("login timed out") // the client is sent 408
			return nil
		})
	for i, want := range []int{408, 429} {
		resp, err := app.Test(httptest.NewRequest("POST", "/login", nil), fiber.TestConfig{Timeout: 0})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d: the client was sent 408, a failure", i+1, resp.StatusCode, want)
		}
	}
}
