package otellimit_test

import (
	"net/http"
	"regexp"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/otellimit"
)

var (
	mount = adaptertest.Constructors[func(http.Handler) http.Handler]{LimitFunc: nethttp.Limit, NewFunc: nethttp.New}
	param = regexp.MustCompile(`:(\w+)`)
)

// build returns adaptertest.Bench's builder for a net/http app whose limits carry opts
// too: "/user/:id" becomes the ServeMux route GET /user/{id}.
func build(opts ...core.Option) func(adaptertest.App) func() int {
	return func(app adaptertest.App) func() int {
		mux := http.NewServeMux()
		for _, rt := range app.Routes {
			var h http.Handler = ok
			for i := len(rt.Limits) - 1; i >= 0; i-- {
				h = mount.Mount(rt.Limits[i].WithOpts(opts...))(h)
			}
			mux.Handle("GET "+param.ReplaceAllString(rt.Path, "{$1}"), h)
		}
		return adaptertest.SendHTTP(mux)
	}
}

// BenchmarkMiddleware runs the adapters' middleware benchmark on net/http without and
// with the option: compare the two "standard/interleaved" x-bare ratios. "direct" times
// the limited route with the option against the same route without it, in one loop.
func BenchmarkMiddleware(b *testing.B) {
	m := otellimit.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	b.Run("without", func(b *testing.B) { adaptertest.Bench(b, build(), nil) })
	b.Run("with", func(b *testing.B) { adaptertest.Bench(b, build(m.Option()), nil) })
	// The same, with an observer that does nothing: what core's observer hook costs on
	// its own, whatever the observer does.
	for _, c := range []struct {
		name string
		opt  core.Option
	}{{"direct", m.Option()}, {"direct-empty-observer", core.WithObserver(func(core.Event) {})}} {
		b.Run(c.name, func(b *testing.B) {
			var without, with func() int
			for _, a := range adaptertest.BenchApps() {
				if a.Name == "standard" {
					without, with = build()(a.App), build(c.opt)(a.App)
				}
			}
			adaptertest.Interleaved(b, without, with, "without")
		})
	}
}

// TestOptionAddsNoAllocation: a limited route with the option allocates no more than the
// bare route.
func TestOptionAddsNoAllocation(t *testing.T) {
	m := otellimit.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	adaptertest.ExpectNoExtraAllocs(t, 0, 1, build(m.Option()))
}
