package ginlimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/internal/hook"
)

func init() { gin.SetMode(gin.TestMode) }

var ad = adapter{adaptertest.Constructors[gin.HandlerFunc]{LimitFunc: ginlimit.Limit, NewFunc: ginlimit.New}}

func TestConformance(t *testing.T) { adaptertest.Run(t, ad) }

func BenchmarkMiddleware(b *testing.B) {
	adaptertest.Bench(b, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) }, floor())
}

// floor is the bare route behind the least a limiter does (adaptertest.Floor).
func floor() func() int {
	f := adaptertest.NewFloor[string]()
	r := gin.New()
	r.GET("/user/:id", func(c *gin.Context) {
		f.Admit(hook.HostOf(c.Request.RemoteAddr))
		adaptertest.SetFloorFields(c.Writer.Header())
	}, ok)
	return adaptertest.SendHTTP(r)
}

type adapter struct {
	adaptertest.Constructors[gin.HandlerFunc]
}

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "ginlimit", Pattern: func(p string) string { return p }, FrameworkTrust: true, ValueKey: "user"}
}

func (adapter) WithDenyHandler(status int, body string) core.Option {
	return ginlimit.WithDenyHandler(func(c *gin.Context, d core.Decision) {
		c.Header("X-Wait", adaptertest.Seconds(d.RetryAfter))
		if status != 0 {
			c.String(status, "%s", body)
		}
	})
}

func (a adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
	return adaptertest.ServeHTTP(adaptertest.Recover(a.handler(app)))
}

func ok(c *gin.Context) { c.String(200, "ok") }

// answer is the handler of a route that answers as the request asks.
func answer(c *gin.Context) { c.String(adaptertest.Answer(c.GetHeader), "ok") }

func (a adapter) handler(app adaptertest.App) http.Handler {
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
	for _, m := range a.MountAll(app.Use, trust...) {
		r.Use(m)
	}
	for _, rt := range app.Routes {
		h := ok
		if rt.Answers {
			h = answer
		}
		r.GET(rt.Path, append(a.MountAll(rt.Limits, trust...), h)...)
	}
	return r
}

func TestLimitAddsNoAllocation(t *testing.T) {
	adaptertest.ExpectNoExtraAllocs(t, 0, 1, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) })
}

// A handler that takes the connection over leaves a status Gin never saw: it counts.
func TestCountWhenHijackCounts(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.GET("/ws", ginlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c *gin.Context) { adaptertest.Hijack(c.Writer) })
	adaptertest.CheckHijackCounts(t, r)
}
