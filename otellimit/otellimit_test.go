package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/otellimit"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// fresh gives each limit a store of its own, so that every test starts empty however often
// it runs.
func fresh() core.Option { return core.WithStore(core.NewMemoryStore(nil)) }

// send sends h n requests for path from remote and returns the statuses.
func send(h http.Handler, path, remote string, n int) []int {
	codes := make([]int, n)
	for i := range codes {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[i] = w.Code
	}
	return codes
}

func setup() (*otellimit.Metrics, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	return otellimit.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), reader
}

// collect returns the package's metrics by name, checking they come from its meter.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellimit.ScopeName {
			t.Errorf("instrumentation scope %q, want %q", sm.Scope.Name, otellimit.ScopeName)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	return got
}

// point is one data point of reqlimit.requests.
type point struct {
	scope, policy, result string
	n                     int64
}

const (
	requestsDesc = "Requests a limit decided, by reqlimit.result: admitted, refused, dry_run_refused (over the limit but let through in dry run), store_error (the fail mode decided) or released (admitted, then given back by its status: core.WithCountWhen)."
	errorsDesc   = "Decisions the store failed, by error.type: timeout, canceled, connection or _OTHER."
)

// requests returns the reqlimit.requests a test expects to have been recorded.
func requests(points ...point) metricdata.Metrics {
	sum := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
	for _, p := range points {
		sum.DataPoints = append(sum.DataPoints, metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(attribute.String("reqlimit.scope", p.scope),
				attribute.String("reqlimit.policy", p.policy), attribute.String("reqlimit.result", p.result)),
			Value: p.n,
		})
	}
	return metricdata.Metrics{Name: "reqlimit.requests", Description: requestsDesc, Unit: "{request}", Data: sum}
}

func storeErrors(kind string, n int64) metricdata.Metrics {
	return metricdata.Metrics{Name: "reqlimit.store.errors", Description: errorsDesc, Unit: "{error}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(attribute.String("error.type", kind)), Value: n}}}}
}

func assertEqual(t *testing.T, want metricdata.Metrics, got map[string]metricdata.Metrics) {
	t.Helper()
	g, ok := got[want.Name]
	if !ok {
		t.Errorf("no %s recorded", want.Name)
		return
	}
	metricdatatest.AssertEqual(t, want, g, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// durations returns the sample count and sum of reqlimit.store.duration, 0 if none.
func durations(t *testing.T, got map[string]metricdata.Metrics) (uint64, float64) {
	t.Helper()
	m, ok := got["reqlimit.store.duration"]
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || m.Unit != "s" || h.DataPoints[0].Attributes.Len() != 0 {
		t.Fatalf("reqlimit.store.duration: %+v", m)
	}
	if b := h.DataPoints[0].Bounds; len(b) == 0 || b[0] >= 0.001 {
		t.Errorf("bounds %v, want some below a millisecond", b)
	}
	return h.DataPoints[0].Count, h.DataPoints[0].Sum
}

func TestAdmittedAndRefusedCounts(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))

	got := send(mux, "/user/1", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	ms := collect(t, reader)
	assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "admitted", 3}, point{"GET /user/{id}", "3/1m", "refused", 2}), ms)
	if _, ok := ms["reqlimit.store.errors"]; ok {
		t.Error("store errors recorded; the memory store does not fail")
	}
	if n, _ := durations(t, ms); n != 0 {
		t.Errorf("%d store duration samples for the memory store, want 0", n)
	}
}

// A limit counting failures only: successes are admitted, then released.
func TestReleasedCounts(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), core.WithCountWhen(core.Failed), m.Option())(ok))

	got := send(mux, "/user/1", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "admitted", 5}, point{"GET /user/{id}", "3/1m", "released", 5}), collect(t, reader))
}

func TestDryRunCounts(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /search", nethttp.Limit(3, time.Minute, core.WithDryRun(), fresh(), m.Option())(ok))

	got := send(mux, "/search", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v: dry run refuses nothing", got, want)
	}
	assertEqual(t, requests(point{"GET /search", "3/1m", "admitted", 3}, point{"GET /search", "3/1m", "dry_run_refused", 2}), collect(t, reader))
}

// failingStore fails every decision with err after delay.
type failingStore struct {
	err   error
	delay time.Duration
}

func (s failingStore) Decide(context.Context, core.Query) (core.Decision, error) {
	time.Sleep(s.delay)
	return core.Decision{}, s.err
}

func TestStoreErrorCounts(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "redis"}}
	for _, c := range []struct {
		err  error
		kind string
	}{
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("redis: %w", context.Canceled), "canceled"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "connection"},
		{dial, "connection"},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), "connection"},
		{io.EOF, "connection"},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "timeout"},
		{errors.New("OOM command not allowed"), "_OTHER"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			m, reader := setup()
			mux := http.NewServeMux()
			store := failingStore{err: c.err, delay: time.Millisecond}
			quiet := core.WithErrorHook(func(context.Context, error) {})
			mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, core.WithStore(store),
				core.WithFailMode(core.FailOpen), quiet, m.Option())(ok))

			got := send(mux, "/user/7", "192.0.2.1:1234", 2)
			if want := []int{200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("statuses %v, want %v: the store fails open", got, want)
			}
			ms := collect(t, reader)
			assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "store_error", 2}), ms)
			assertEqual(t, storeErrors(c.kind, 2), ms)
			if n, sum := durations(t, ms); n != 2 || sum < 2*time.Millisecond.Seconds() {
				t.Errorf("store duration: %d samples summing %gs, want 2 of at least 1ms each", n, sum)
			}
		})
	}
}

// timedStore is a memory store behind the Store interface, which core times as it would
// a network store.
type timedStore struct{ core.Store }

func TestStoreDurationOfDecisions(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, core.WithStore(timedStore{core.NewMemoryStore(nil)}), m.Option())(ok))

	send(mux, "/user/1", "192.0.2.1:1234", 5)
	if n, _ := durations(t, collect(t, reader)); n != 5 {
		t.Errorf("%d store duration samples, want 5: one per decision, admitted or refused", n)
	}
}

func TestCostTooHighIsRefused(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	quiet := core.WithErrorHook(func(context.Context, error) {})
	mux.Handle("GET /upload", nethttp.Limit(3, time.Minute, fresh(), quiet, m.Option(),
		core.WithCost(func(core.Request) int { return 4 }))(ok))

	if got := send(mux, "/upload", "192.0.2.1:1234", 1); got[0] != 413 {
		t.Fatalf("status %d, want 413", got[0])
	}
	ms := collect(t, reader)
	assertEqual(t, requests(point{"GET /upload", "3/1m", "refused", 1}), ms)
	if _, ok := ms["reqlimit.store.errors"]; ok {
		t.Error("store errors recorded; the store did not fail")
	}
}

func TestUnroutedScope(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", ok)
	// Around the whole mux, without nethttp.WithMux, the limit decides before routing.
	h := nethttp.Limit(3, time.Minute, fresh(), m.Option())(mux)

	send(h, "/user/1", "192.0.2.1:1234", 1)
	send(h, "/nowhere", "192.0.2.1:1234", 1)
	assertEqual(t, requests(point{"unrouted", "3/1m", "admitted", 2}), collect(t, reader))
}

func TestLimitsShareOneSet(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))
	mux.Handle("GET /search", nethttp.Limit(500, 2*time.Second, core.WithRate(2000, 10*time.Second), fresh(), m.Option())(ok))
	// Both limits on one route, with one Option given to both: the sets differ by policy.
	shared := m.Option()
	mux.Handle("GET /both", nethttp.Limit(1, time.Minute, fresh(), shared)(nethttp.Limit(2, time.Minute, fresh(), shared)(ok)))

	send(mux, "/user/1", "192.0.2.1:1234", 4)
	send(mux, "/search", "192.0.2.1:1234", 2)
	send(mux, "/both", "192.0.2.1:1234", 2)
	assertEqual(t, requests(
		point{"GET /both", "1/1m", "admitted", 1},
		point{"GET /both", "1/1m", "refused", 1},
		point{"GET /both", "2/1m", "admitted", 1},
		point{"GET /user/{id}", "3/1m", "admitted", 3},
		point{"GET /user/{id}", "3/1m", "refused", 1},
		point{"GET /search", "500/2s,2000/10s", "admitted", 2},
	), collect(t, reader))
}

// TestNilProviderIsTheGlobal: New(nil) records through the global provider, even one set
// after New.
func TestNilProviderIsTheGlobal(t *testing.T) {
	prev := otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	m := otellimit.New(nil)
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))

	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))
	send(mux, "/user/1", "192.0.2.1:1234", 1)
	assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "admitted", 1}), collect(t, reader))
}

// TestClientsMakeNoSeries holds the cardinality promise: the client is not an attribute,
// so a crowd of clients adds no attribute set.
func TestClientsMakeNoSeries(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))
	points := func() int {
		n := 0
		for _, metric := range collect(t, reader) {
			switch d := metric.Data.(type) {
			case metricdata.Sum[int64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n += len(d.DataPoints)
			default:
				t.Fatalf("%s: unexpected %T", metric.Name, d)
			}
		}
		return n
	}
	send(mux, "/user/0", "192.0.2.1:1234", 4) // admitted and refused both exist
	before := points()
	const clients = 100_000
	r := httptest.NewRequest("GET", "/user/1", nil)
	for i := range clients {
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	if after := points(); after != before || before != 2 {
		t.Errorf("%d data points after %d clients, %d before, want 2", after, clients, before)
	}
	assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "admitted", 3 + clients}, point{"GET /user/{id}", "3/1m", "refused", 1}), collect(t, reader))
}

// TestTwoOnOneProvider: two Metrics on one provider report one total per attribute set.
func TestTwoOnOneProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	a, b := otellimit.New(mp), otellimit.New(mp)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), a.Option())(nethttp.Limit(3, time.Minute, fresh(), b.Option())(ok)))
	send(mux, "/user/1", "192.0.2.1:1234", 4)
	assertEqual(t, requests(point{"GET /user/{id}", "3/1m", "admitted", 6}, point{"GET /user/{id}", "3/1m", "refused", 1}), collect(t, reader))
}
