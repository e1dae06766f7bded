package nethttp_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/internal/hook"
	"github.com/reqlimit/reqlimit/nethttp"
)

var ad = adapter{adaptertest.Constructors[func(http.Handler) http.Handler]{LimitFunc: nethttp.Limit, NewFunc: nethttp.New}}

func TestConformance(t *testing.T) { adaptertest.Run(t, ad) }

func BenchmarkMiddleware(b *testing.B) {
	adaptertest.Bench(b, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) }, floor())
}

// floor is the bare route behind the least a limiter does (adaptertest.Floor).
func floor() func() int {
	f := adaptertest.NewFloor[string]()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle(pattern("/user/:id"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Admit(hook.HostOf(r.RemoteAddr))
		adaptertest.SetFloorFields(w.Header())
		ok.ServeHTTP(w, r)
	}))
	return adaptertest.SendHTTP(mux)
}

type adapter struct {
	adaptertest.Constructors[func(http.Handler) http.Handler]
}

type valueKey struct{}

var param = regexp.MustCompile(`:(\w+)`)

func pattern(path string) string { return "GET " + param.ReplaceAllString(path, "{$1}") }

func (adapter) Traits() adaptertest.Traits {
	return adaptertest.Traits{Name: "nethttp", Pattern: pattern, ValueKey: valueKey{}, PreRouting: true}
}

func (adapter) WithDenyHandler(status int, body string) core.Option {
	return nethttp.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d core.Decision) {
		w.Header().Set("X-Wait", adaptertest.Seconds(d.RetryAfter))
		if status == 0 {
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

func (a adapter) Serve(app adaptertest.App) func(adaptertest.Request) adaptertest.Response {
	return adaptertest.ServeHTTP(adaptertest.Recover(a.handler(app)))
}

// answer is the handler of a route that answers as the request asks.
func answer(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(adaptertest.Answer(r.Header.Get))
	io.WriteString(w, "ok")
}

func (a adapter) handler(app adaptertest.App) http.Handler {
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	setValue := func(h http.Handler) http.Handler { return h }
	if name := app.ValueFromHeader; name != "" {
		setValue = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if v := r.Header.Get(name); v != "" {
					r = r.WithContext(context.WithValue(r.Context(), valueKey{}, v))
				}
				h.ServeHTTP(w, r)
			})
		}
	}
	for _, rt := range app.Routes {
		var h http.Handler = ok
		if rt.Answers {
			h = http.HandlerFunc(answer)
		}
		for i := len(rt.Limits) - 1; i >= 0; i-- {
			h = a.Mount(rt.Limits[i])(h)
		}
		mux.Handle(pattern(rt.Path), setValue(h))
	}
	var h http.Handler = mux
	for i := len(app.Use) - 1; i >= 0; i-- {
		h = a.Mount(app.Use[i].WithOpts(nethttp.WithMux(mux)))(h)
	}
	for i := len(app.Pre) - 1; i >= 0; i-- {
		h = a.Mount(app.Pre[i])(h) // without WithMux: before routing, the pattern is unknown
	}
	if len(app.Use) > 0 || len(app.Pre) > 0 {
		h = setValue(h)
	}
	return h
}

func TestLimitAddsNoAllocation(t *testing.T) {
	adaptertest.ExpectNoExtraAllocs(t, 0, 1, func(app adaptertest.App) func() int { return adaptertest.SendHTTP(ad.handler(app)) })
}
