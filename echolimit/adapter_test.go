package echolimit_test

import (
	"net"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

func TestConformance(t *testing.T) { adaptertest.Run(t, adapter{}) }

type adapter struct{}

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "echolimit", Pattern: func(p string) string { return p }, FrameworkTrust: true, ValueKey: "user"}
}

func (adapter) Limit(count int, period time.Duration, opts ...core.Option) {
	echolimit.Limit(count, period, opts...)
}

func (adapter) New(policy string, opts ...core.Option) error {
	_, err := echolimit.New(policy, opts...)
	return err
}

func (adapter) DenyWith(status int, body string) core.Option {
	return echolimit.DenyWith(func(c echo.Context, d core.Decision) error {
		c.Response().Header().Set("X-Wait", adaptertest.Seconds(d.RetryAfter))
		return c.String(status, body)
	})
}

func (adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
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
	mount := func(l adaptertest.Limit) echo.MiddlewareFunc {
		return adaptertest.Mount(l, echolimit.Limit, echolimit.New)
	}
	for _, l := range app.Use {
		e.Use(mount(l))
	}
	for _, rt := range app.Routes {
		var ms []echo.MiddlewareFunc
		for _, l := range rt.Limits {
			ms = append(ms, mount(l))
		}
		e.GET(rt.Path, func(c echo.Context) error { return c.String(200, "ok") }, ms...)
	}
	return adaptertest.ServeHTTP(e)
}
