package adaptertest

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// BenchApps are the applications the middleware benchmarks compare: one route, bare, then
// behind a limit so generous that every request stays admitted, without and with the
// standard rate-limit fields.
func BenchApps() []struct {
	Name     string
	App      App
	Uncached bool
} {
	generous := func(opts ...core.Option) []Limit {
		opts = append([]core.Option{core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods()}, opts...)
		// An exact ring (the form of every limit up to bounds.LargestExact per window) whose
		// 1µs window never fills at benchmark speed: every request is admitted, so the
		// admitted path is what is measured. Its cost does not depend on the numbers.
		return []Limit{{Count: 100, Period: time.Microsecond, Opts: opts}}
	}
	// A policy of every size, each admitting every request: the store's clock runs a
	// little faster than the rate allows (see aheadClock).
	// The store's sweep interval (a minute of its clock by default) is scaled with that
	// clock, as if each request took a microsecond: without it, a clock that moves 21 s a
	// request would start a pass over the idle keys every third request, where a real
	// server starts one a minute.
	sized := func(count int, period time.Duration) []Limit {
		step := period / time.Duration(count) * 21 / 20
		sweep := time.Duration(math.MaxInt64)
		if perMinute := int64(time.Minute / time.Microsecond); int64(step) < math.MaxInt64/perMinute {
			sweep = time.Duration(perMinute) * step
		}
		store := core.NewMemoryStore(&core.MemoryConfig{SweepInterval: sweep, Now: aheadClock(step)})
		opts := []core.Option{core.WithStore(store), core.WithShortPeriods()}
		return []Limit{{Count: count, Period: period, Opts: opts}}
	}
	return []struct {
		Name string
		App  App
		// Uncached says the RateLimit values are too many to cache: an adapter whose
		// framework keeps the value it is given (an http.Header) gets a new one.
		Uncached bool
	}{
		{"bare", App{Routes: []Route{{Path: "/user/:id"}}}, false},
		{"headers-off", App{Routes: []Route{{Path: "/user/:id", Limits: generous(core.WithHeaders(core.HeadersOff))}}}, false},
		{"standard", App{Routes: []Route{{Path: "/user/:id", Limits: generous()}}}, false},
		{"standard-3per1m", App{Routes: []Route{{Path: "/user/:id", Limits: sized(3, time.Minute)}}}, false},
		{"standard-1e9per1h", App{Routes: []Route{{Path: "/user/:id", Limits: sized(1e9, time.Hour)}}}, true},
		{"standard-1e6per1s", App{Routes: []Route{{Path: "/user/:id", Limits: sized(1e6, time.Second)}}}, true},
		{"standard-20per50ms", App{Routes: []Route{{Path: "/user/:id", Limits: sized(20, 50*time.Millisecond)}}}, false},
	}
}

// aheadClock returns a clock for a memory store (MemoryConfig.Now) in a benchmark of the
// admitted path under any rate: the monotonic one, moved on by step more at every reading.
// One client sending as fast as it can then stays within any rate whose count per period
// is slower than step, while the store still reads a real clock at every decision. The
// store is then for one goroutine only.
func aheadClock(step time.Duration) func() time.Time {
	start := time.Now()
	var n time.Duration
	return func() time.Time {
		n++
		return start.Add(time.Since(start) + n*step)
	}
}

// A Floor is the least work any strict per-client limiter does for an admitted request,
// without reqlimit: find the client's state by its address, read the monotonic clock and
// update the state (a count and a time) under a lock. Adapters' benchmarks put it on the
// bare route, with the two standard fields set as already formatted values, as "floor":
// what no limiter can cost less than on that framework, the measure of how much of a
// limit's cost is its own.
// K is the client's address as the framework gives it, without the port (which changes
// with every connection): the host of net/http's RemoteAddr, the IP of fasthttp's
// net.Addr.
type Floor[K comparable] struct {
	mu      sync.Mutex
	clients map[K]*floorState
}

type floorState struct {
	n    int
	last int64
}

// NewFloor returns a Floor with no client seen.
func NewFloor[K comparable]() *Floor[K] {
	return &Floor[K]{clients: map[K]*floorState{}}
}

// floorStart is when the floors' clock starts: they read it as the memory store reads its
// own, by time.Since.
var floorStart = time.Now()

// Admit records a request of the client at peer.
func (f *Floor[K]) Admit(peer K) {
	now := int64(time.Since(floorStart))
	f.mu.Lock()
	s := f.clients[peer]
	if s == nil {
		s = new(floorState)
		f.clients[peer] = s
	}
	s.n++
	s.last = now
	f.mu.Unlock()
}

// The standard fields the floor sets: a 3/1m limit's, as one-element values a response
// can share, so that setting them allocates nothing.
var (
	FloorPolicy = []string{`"3/1m";q=3;w=60`}
	FloorField  = []string{`"3/1m";r=2;t=60`}
)

// SetFloorFields sets the floor's fields into a net/http response's header.
func SetFloorFields(h http.Header) {
	h["Ratelimit-Policy"] = FloorPolicy
	h["Ratelimit"] = FloorField
}

// Bench runs BenchApps as sub-benchmarks. build returns a function sending the app one
// GET /user/1 from DefaultRemote, reusing whatever it can, and returning the status;
// floor, if not nil, is such a function for the bare route behind the adapter's Floor
// middleware.
//
// Then, for the floor and each limited app, an "interleaved" run (see Interleaved) whose
// x-bare metric is the ratio to the bare route, steadier than dividing two separate runs.
func Bench(b *testing.B, build func(App) func() int, floor func() int) {
	apps := BenchApps()
	for _, c := range apps {
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
	if floor != nil {
		b.Run("floor/interleaved", func(b *testing.B) {
			Interleaved(b, build(apps[0].App), floor, "bare")
		})
	}
	for _, c := range apps[1:] {
		b.Run(c.Name+"/interleaved", func(b *testing.B) {
			Interleaved(b, build(apps[0].App), build(c.App), "bare")
		})
	}
}

// interleaveChunk is how many requests each side of an interleaved benchmark sends in a
// row: enough that reading the clock around a chunk costs nothing measurable, few enough
// that both handlers stay warm in the caches.
const interleaveChunk = 64

// Interleaved measures limited against base in one loop, chunk by chunk in turn, so that
// whatever else the machine does (a 2-core VM's neighbours, frequency changes) falls on
// both sides alike. It reports the ratio ("x-" + name, name saying what base is) and each
// side's ns per request; ns/op counts one chunk of each.
func Interleaved(b *testing.B, base, limited func() int, name string) {
	var tb, tl time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		for range interleaveChunk {
			base()
		}
		t1 := time.Now()
		for range interleaveChunk {
			limited()
		}
		tl += time.Since(t1)
		tb += t1.Sub(t0)
		n += interleaveChunk
	}
	if code, codeBase := limited(), base(); code != 200 || codeBase != 200 {
		b.Fatalf("statuses %d and %d by the end, want 200: a limit refused", codeBase, code)
	}
	b.ReportMetric(float64(tl)/float64(tb), "x-"+name)
	b.ReportMetric(float64(tb)/float64(n), name+"-ns/req")
	b.ReportMetric(float64(tl)/float64(n), "limited-ns/req")
}

// SendHTTP returns a Bench send function for a net/http handler: one request and one
// response writer reused, so that only the handler's own work is measured. The writer's
// header map is emptied before each request, as a new response's would be: limits add to
// the RateLimit fields rather than replace them.
func SendHTTP(h http.Handler) func() int {
	r, _ := http.NewRequest("GET", "/user/1", nil)
	r.RemoteAddr = DefaultRemote
	w := &benchWriter{h: http.Header{}}
	return func() int {
		clear(w.h)
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

// ExpectNoExtraAllocs fails t if a limited route of BenchApps allocates more per request
// than the bare route plus framework, the allocations the framework itself makes for any
// middleware, plus uncached on the apps whose RateLimit values cannot be cached (1 for an
// adapter whose framework keeps the value it is given, 0 for one that copies it): the
// limit's admitted path allocates nothing else. build is Bench's.
func ExpectNoExtraAllocs(t *testing.T, framework, uncached float64, build func(App) func() int) {
	if raceEnabled {
		t.Skip("allocation counts are random under the race detector; .ci/run runs this without it")
	}
	// Beside the benchmarks' apps, a limit behind a trusted proxy: core reads the forwarded
	// header through the view adapters pass when no function of the application needs the
	// request, so trusting a proxy costs no allocation either.
	apps := append(BenchApps(), struct {
		Name     string
		App      App
		Uncached bool
	}{"behind-a-trusted-proxy", App{Routes: []Route{{Path: "/user/:id", Limits: []Limit{{Count: 100, Period: time.Microsecond,
		Opts: []core.Option{core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods(), core.WithTrustedProxies("192.0.2.0/24")}}}}}}, false})
	// AllocsPerRun counts every goroutine's allocations, so work left running by earlier
	// tests can only add to a count: the least of a few is the route's own.
	allocs := func(app App) float64 {
		send := build(app)
		least := math.Inf(1)
		for range 5 {
			least = min(least, testing.AllocsPerRun(200, func() {
				if code := send(); code != 200 {
					t.Fatalf("status %d, want 200", code)
				}
			}))
		}
		return least
	}
	bare := allocs(apps[0].App)
	for _, c := range apps[1:] {
		extra := framework
		if c.Uncached {
			extra += uncached
		}
		if n := allocs(c.App); n > bare+extra {
			t.Errorf("%s: %v allocations per request, the bare route %v (+%v for any middleware, +%v for an uncached value)", c.Name, n, bare, framework, uncached)
		}
	}
}
