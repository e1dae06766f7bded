package fiberlimit_test

import (
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

var ad = adapter{adaptertest.Constructors[fiber.Handler]{LimitFunc: fiberlimit.Limit, NewFunc: fiberlimit.New}}

func TestConformance(t *testing.T) { adaptertest.Run(t, ad) }

func BenchmarkMiddleware(b *testing.B) {
	adaptertest.Bench(b, func(app adaptertest.App) func() int { return sendFiber(ad.app(app)) }, floor())
}

// floor is the bare route behind the least a limiter does (adaptertest.Floor). Fiber
// gives the peer as a net.Addr; a limiter keys by its IP.
func floor() func() int {
	f := adaptertest.NewFloor[[16]byte]()
	// The fields' names are canonical already: fasthttp need not normalize them.
	policyName, policy := []byte("Ratelimit-Policy"), []byte(adaptertest.FloorPolicy[0])
	fieldName, field := []byte("Ratelimit"), []byte(adaptertest.FloorField[0])
	app := fiber.New()
	app.Get("/user/:id", func(c *fiber.Ctx) error {
		f.Admit([16]byte(c.Context().RemoteAddr().(*net.TCPAddr).IP.To16()))
		c.Response().Header.SetCanonical(policyName, policy)
		c.Response().Header.SetCanonical(fieldName, field)
		return c.Next()
	}, ok)
	return sendFiber(app)
}

type adapter struct {
	adaptertest.Constructors[fiber.Handler]
}

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "fiberlimit", Pattern: func(p string) string { return p },
		FrameworkTrust: true, TrustHeader: "X-Real-Ip", UseSharesBucket: true, ValueKey: "user", PreRouting: true}
}

func (adapter) WithDenyHandler(status int, body string) core.Option {
	return fiberlimit.WithDenyHandler(func(c *fiber.Ctx, d core.Decision) error {
		c.Set("X-Wait", adaptertest.Seconds(d.RetryAfter))
		if status == 0 {
			return nil
		}
		return c.Status(status).SendString(body)
	})
}

func (a adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
	return serve(a.app(app))
}

func (a adapter) app(app adaptertest.App) *fiber.App {
	var cfg fiber.Config
	if len(app.TrustProxies) > 0 {
		// Fiber's own mechanism: believe ProxyHeader only from TrustedProxies.
		cfg = fiber.Config{EnableTrustedProxyCheck: true, TrustedProxies: app.TrustProxies, ProxyHeader: "X-Real-Ip"}
	}
	f := fiber.New(cfg)
	if name := app.ValueFromHeader; name != "" {
		f.Use(func(c *fiber.Ctx) error {
			if v := c.Get(name); v != "" {
				c.Locals("user", utils.CopyString(v))
			}
			return c.Next()
		})
	}
	for _, m := range append(a.MountAll(app.Pre), a.MountAll(app.Use)...) {
		f.Use(m) // Fiber's app.Use is both: it reports the Use prefix, not the route
	}
	for _, rt := range app.Routes {
		h := ok
		if rt.Answers {
			h = answer
		}
		f.Get(rt.Path, append(a.MountAll(rt.Limits), h)...)
	}
	return f
}

func ok(c *fiber.Ctx) error { return c.SendString("ok") }

// answer is the handler of a route that answers as the request asks: a failure is an
// error, which the app's ErrorHandler writes after every handler has returned.
func answer(c *fiber.Ctx) error {
	status := adaptertest.Answer(func(name string) string { return c.Get(name) })
	if status >= 400 {
		return fiber.NewError(status)
	}
	return c.Status(status).SendString("ok")
}

// serve drives app in-process through one fasthttp.RequestCtx reused for every request,
// as a keep-alive connection would: its buffers are overwritten by each request, so any
// string kept from an earlier one would show.
func serve(app *fiber.App) func(adaptertest.Request) adaptertest.Response {
	h := app.Handler()
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	return func(r adaptertest.Request) adaptertest.Response {
		req.Reset()
		req.Header.SetMethod("GET")
		req.SetRequestURI(r.Path)
		for i := 0; i+1 < len(r.Header); i += 2 {
			req.Header.Add(r.Header[i], r.Header[i+1])
		}
		ctx.Init(&req, addr(r.RemoteAddr()), nil)
		// Init keeps the last response and user values; a server reusing ctx resets them.
		ctx.Response.Reset()
		ctx.ResetUserValues()
		recovering(h)(&ctx)
		resp := adaptertest.Response{Status: ctx.Response.StatusCode(), Header: http.Header{}, Body: string(ctx.Response.Body())}
		for k, v := range ctx.Response.Header.All() {
			resp.Header.Add(string(k), string(v))
		}
		return resp
	}
}

// recovering is the outermost middleware: it answers 500 to a request whose handler
// panicked with adaptertest.ErrPanic, and lets any other panic through.
func recovering(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer func() {
			if p := recover(); p != nil {
				if p != adaptertest.ErrPanic {
					panic(p)
				}
				ctx.Response.SetStatusCode(fiber.StatusInternalServerError)
			}
		}()
		h(ctx)
	}
}

// addr is the net.Addr a server would see: TCP for "host:port", else the raw text.
func addr(s string) net.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return &net.TCPAddr{IP: ap.Addr().AsSlice(), Port: int(ap.Port()), Zone: ap.Addr().Zone()}
	}
	return rawAddr(s)
}

type rawAddr string

func (a rawAddr) Network() string { return "unix" }
func (a rawAddr) String() string  { return string(a) }

// sendFiber is a Bench send function: one request in one RequestCtx, reused as a
// keep-alive connection's would be.
func sendFiber(app *fiber.App) func() int {
	h := app.Handler()
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/user/1")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, addr(adaptertest.DefaultRemote), nil)
	return func() int {
		ctx.Response.Reset()
		h(&ctx)
		return ctx.Response.StatusCode()
	}
}

func TestLimitAddsNoAllocation(t *testing.T) {
	adaptertest.ExpectNoExtraAllocs(t, 0, 0, func(app adaptertest.App) func() int { return sendFiber(ad.app(app)) })
}

// A handler that takes the connection over leaves a status fasthttp never sent: it counts.
func TestCountWhenHijackCounts(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/ws", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c *fiber.Ctx) error {
			c.Context().HijackSetNoResponse(true)
			c.Context().Hijack(func(conn net.Conn) {
				conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n"))
			})
			return nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	defer app.Shutdown()
	adaptertest.CheckHijackCountsAt(t, ln.Addr().String())
}
