package adaptertest

import (
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// BenchApps are the applications the middleware benchmarks compare: one route, bare, then
// behind a limit so generous that every request stays admitted, without and with the
// standard rate-limit fields.
func BenchApps() []struct {
	Name string
	App  App
} {
	generous := func(opts ...core.Option) []Limit {
		opts = append([]core.Option{core.WithStore(core.NewMemoryStore())}, opts...)
		// An exact ring (the form of every limit up to core.ExactMax per window) whose
		// 1µs window never fills at benchmark speed: every request is admitted, so the
		// admitted path is what is measured. Its cost does not depend on the numbers.
		return []Limit{{Count: 100, Period: time.Microsecond, Opts: opts}}
	}
	return []struct {
		Name string
		App  App
	}{
		{"bare", App{Routes: []Route{{Path: "/user/:id"}}}},
		{"headers-off", App{Routes: []Route{{Path: "/user/:id", Limits: generous(core.WithHeaders(core.HeadersOff))}}}},
		{"standard", App{Routes: []Route{{Path: "/user/:id", Limits: generous()}}}},
	}
}

// Bench runs BenchApps as sub-benchmarks. build returns a function sending the app one
// GET /user/1 from DefaultRemote, reusing whatever it can, and returning the status.
func Bench(b *testing.B, build func(App) func() int) {
	for _, c := range BenchApps() {
		b.Run(c.Name, func(b *testing.B) {
			send := build(c.App)
			if code := send(); code != 200 {
				b.Fatalf("status %d, want 200", code)
			}
			b.ReportAllocs()
			code := 200
			for b.Loop() {
				code = send()
			}
			if code != 200 {
				b.Fatalf("status %d by the end, want 200: the limit refused", code)
			}
		})
	}
}

// SendHTTP returns a Bench send function for a net/http handler: one request and one
// response writer reused, so that only the handler's own work is measured.
func SendHTTP(h http.Handler) func() int {
	r, _ := http.NewRequest("GET", "/user/1", nil)
	r.RemoteAddr = DefaultRemote
	w := &benchWriter{h: http.Header{}}
	return func() int {
		w.code = 200
		h.ServeHTTP(w, r)
		return w.code
	}
}

type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
