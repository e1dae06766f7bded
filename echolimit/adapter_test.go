package echolimit_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/internal/hook"
)

var ad = adapter{adaptertest.Constructors[echo.MiddlewareFunc]{LimitFunc: echolimit.Limit, NewFunc: echolimit.New}}

func TestConformance(t *testing.T) { adaptertest.Run(t, ad) }

func BenchmarkMiddleware(b *testing.B) {
	adaptertest.Bench(b, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) }, floor())
}

// floor is the bare route behind the least a limiter does (adaptertest.Floor).
func floor() func() int {
	f := adaptertest.NewFloor[string]()
	e := echo.New()
	e.GET("/user/:id", ok, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			f.Admit(hook.HostOf(c.Request().RemoteAddr))
			adaptertest.SetFloorFields(c.Response().Header())
			return next(c)
		}
	})
	return adaptertest.SendHTTP(e)
}

type adapter struct {
	adaptertest.Constructors[echo.MiddlewareFunc]
}

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "echolimit", Pattern: func(p string) string { return p }, FrameworkTrust: true, ValueKey: "user", PreRouting: true}
}

func (adapter) WithDenyHandler(status int, body string) core.Option {
	return echolimit.WithDenyHandler(func(c echo.Context, d core.Decision) error {
		c.Response().Header().Set("X-Wait", adaptertest.Seconds(d.RetryAfter))
		if status == 0 {
			return nil
		}
		return c.String(status, body)
	})
}

func (a adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
	return adaptertest.ServeHTTP(adaptertest.Recover(a.handler(app)))
}

func ok(c echo.Context) error { return c.String(200, "ok") }

// answer is the handler of a route that answers as the request asks: a failure is an
// error, which Echo's error handler writes after every middleware has returned.
func answer(c echo.Context) error {
	status := adaptertest.Answer(c.Request().Header.Get)
	if status >= 400 {
		return echo.NewHTTPError(status)
	}
	return c.String(status, "ok")
}

func (a adapter) handler(app adaptertest.App) http.Handler {
	e := echo.New()
	if len(app.TrustProxies) > 0 {
		// Echo's own mechanism: an IPExtractor trusting only these ranges (not the
		// loopback, link-local and private ranges it trusts by default).
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, cidr := range app.TrustProxies {
			_, n, err := net.ParseCIDR(cidr)
			if err != nil {
				panic(err)
			}
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	if name := app.ValueFromHeader; name != "" {
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if v := c.Request().Header.Get(name); v != "" {
					c.Set("user", v)
				}
				return next(c)
			}
		})
	}
	var trust []core.Option
	if len(app.TrustProxies) > 0 {
		trust = append(trust, core.WithClientIPFromFramework())
	}
	e.Pre(a.MountAll(app.Pre, trust...)...)
	e.Use(a.MountAll(app.Use, trust...)...)
	for _, rt := range app.Routes {
		h := ok
		if rt.Answers {
			h = answer
		}
		e.GET(rt.Path, h, a.MountAll(rt.Limits, trust...)...)
	}
	return e
}

// Echo applies a route's middleware anew on every request, so any middleware's handler
// closure is one allocation per request.
func TestLimitAddsNoAllocation(t *testing.T) {
	adaptertest.ExpectNoExtraAllocs(t, 1, 1, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) })
}

// A handler that takes the connection over leaves a status Echo never saw: it counts.
func TestCountWhenHijackCounts(t *testing.T) {
	e := echo.New()
	e.GET("/ws", func(c echo.Context) error { adaptertest.Hijack(c.Response()); return nil },
		echolimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)))
	adaptertest.CheckHijackCounts(t, e)
}
