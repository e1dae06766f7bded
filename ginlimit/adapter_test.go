package ginlimit_test

import (
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

func init() { gin.SetMode(gin.TestMode) }

func TestConformance(t *testing.T) { adaptertest.Run(t, adapter{}) }

type adapter struct{}

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "ginlimit", Pattern: func(p string) string { return p }, FrameworkTrust: true, ValueKey: "user"}
}

func (adapter) Limit(count int, period time.Duration, opts ...core.Option) {
	ginlimit.Limit(count, period, opts...)
}

func (adapter) New(policy string, opts ...core.Option) error {
	_, err := ginlimit.New(policy, opts...)
	return err
}

func (adapter) DenyWith(status int, body string) core.Option {
	return ginlimit.DenyWith(func(c *gin.Context, d core.Decision) {
		c.Header("X-Wait", adaptertest.Seconds(d.RetryAfter))
		c.String(status, "%s", body)
	})
}

func (adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
	r := gin.New()
	var trust []core.Option
	if len(app.TrustProxies) > 0 {
		if err := r.SetTrustedProxies(app.TrustProxies); err != nil {
			panic(err)
		}
		trust = append(trust, core.WithClientIPFromFramework())
	}
	if name := app.ValueFromHeader; name != "" {
		r.Use(func(c *gin.Context) {
			if v := c.GetHeader(name); v != "" {
				c.Set("user", v)
			}
		})
	}
	mount := func(l adaptertest.Limit) gin.HandlerFunc {
		return adaptertest.Mount(l.WithOpts(trust...), ginlimit.Limit, ginlimit.New)
	}
	for _, l := range app.Use {
		r.Use(mount(l))
	}
	for _, rt := range app.Routes {
		var hs []gin.HandlerFunc
		for _, l := range rt.Limits {
			hs = append(hs, mount(l))
		}
		r.GET(rt.Path, append(hs, func(c *gin.Context) { c.String(200, "ok") })...)
	}
	return adaptertest.ServeHTTP(r)
}
