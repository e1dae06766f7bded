package promlimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/promlimit"
)

// The metrics' headers, as the text format shows them: GatherAndCompare compares the help
// text too, so a change to it is a change these tests see.
const (
	requestsHeader = `# HELP reqlimit_requests_total Requests a limit decided, by scope (the route pattern, or a WithScope name), policy and outcome: admitted, refused, dry_run_refused (over the limit but let through in dry run), store_error (the fail mode decided) or released (admitted, then given back by its status: core.WithCountWhen).
# TYPE reqlimit_requests_total counter
`
	errorsHeader = `# HELP reqlimit_store_errors_total Decisions the store failed, by kind: timeout, canceled, connection or other.
# TYPE reqlimit_store_errors_total counter
`
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

// storeErrors returns the reqlimit_store_errors_total series with n errors of kind and
// none of the others: every kind is there from the start.
func storeErrors(kind string, n int) string {
	var b strings.Builder
	for _, k := range []string{"canceled", "connection", "other", "timeout"} {
		c := 0
		if k == kind {
			c = n
		}
		fmt.Fprintf(&b, "reqlimit_store_errors_total{kind=%q} %d\n", k, c)
	}
	return b.String()
}

func compare(t *testing.T, reg prometheus.Gatherer, header, series string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(header+series), names...); err != nil {
		t.Error(err)
	}
}

// histogram returns the sample count and sum of reqlimit_store_duration_seconds.
func histogram(t *testing.T, reg prometheus.Gatherer) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "reqlimit_store_duration_seconds" {
			if mf.GetType() != dto.MetricType_HISTOGRAM || len(mf.Metric) != 1 {
				t.Fatalf("reqlimit_store_duration_seconds: %v", mf)
			}
			h := mf.Metric[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no reqlimit_store_duration_seconds")
	return 0, 0
}

func TestAdmittedAndRefusedCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))

	got := send(mux, "/user/1", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} 3
reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /user/{id}"} 2
`, "reqlimit_requests_total")
	// The memory store is not timed, and did not fail.
	if n, _ := histogram(t, reg); n != 0 {
		t.Errorf("%d store duration samples for the memory store, want 0", n)
	}
	compare(t, reg, errorsHeader, storeErrors("", 0), "reqlimit_store_errors_total")
}

// A limit counting failures only: successes are admitted, then released.
func TestReleasedCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), core.WithCountWhen(core.Failed), m.Option())(ok))

	got := send(mux, "/user/1", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} 5
reqlimit_requests_total{outcome="released",policy="3/1m",scope="GET /user/{id}"} 5
`, "reqlimit_requests_total")
}

func TestDryRunCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /search", nethttp.Limit(3, time.Minute, core.WithDryRun(), fresh(), m.Option())(ok))

	got := send(mux, "/search", "192.0.2.1:1234", 5)
	if want := []int{200, 200, 200, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v: dry run refuses nothing", got, want)
	}
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /search"} 3
reqlimit_requests_total{outcome="dry_run_refused",policy="3/1m",scope="GET /search"} 2
`, "reqlimit_requests_total")
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
		{errors.New("OOM command not allowed"), "other"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := promlimit.New(reg)
			mux := http.NewServeMux()
			store := failingStore{err: c.err, delay: time.Millisecond}
			quiet := core.WithErrorHook(func(context.Context, error) {})
			mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, core.WithStore(store),
				core.WithFailMode(core.FailOpen), quiet, m.Option())(ok))

			got := send(mux, "/user/7", "192.0.2.1:1234", 2)
			if want := []int{200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("statuses %v, want %v: the store fails open", got, want)
			}
			compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="store_error",policy="3/1m",scope="GET /user/{id}"} 2
`, "reqlimit_requests_total")
			compare(t, reg, errorsHeader, storeErrors(c.kind, 2), "reqlimit_store_errors_total")
			n, sum := histogram(t, reg)
			if n != 2 || sum < 2*time.Millisecond.Seconds() {
				t.Errorf("store duration: %d samples summing %gs, want 2 of at least 1ms each", n, sum)
			}
		})
	}
}

// timedStore is a memory store behind the Store interface, which core times as it would
// a network store.
type timedStore struct{ core.Store }

func TestStoreDurationOfDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, core.WithStore(timedStore{core.NewMemoryStore(nil)}), m.Option())(ok))

	send(mux, "/user/1", "192.0.2.1:1234", 5)
	if n, _ := histogram(t, reg); n != 5 {
		t.Errorf("%d store duration samples, want 5: one per decision, admitted or refused", n)
	}
}

func TestCostTooHighIsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	quiet := core.WithErrorHook(func(context.Context, error) {})
	mux.Handle("GET /upload", nethttp.Limit(3, time.Minute, fresh(), quiet, m.Option(),
		core.WithCost(func(core.Request) int { return 4 }))(ok))

	if got := send(mux, "/upload", "192.0.2.1:1234", 1); got[0] != 413 {
		t.Fatalf("status %d, want 413", got[0])
	}
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /upload"} 1
`, "reqlimit_requests_total")
	compare(t, reg, errorsHeader, storeErrors("", 0), "reqlimit_store_errors_total") // the store did not fail
}

func TestUnroutedScope(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", ok)
	// Around the whole mux, without nethttp.WithMux, the limit decides before routing.
	h := nethttp.Limit(3, time.Minute, fresh(), m.Option())(mux)

	send(h, "/user/1", "192.0.2.1:1234", 1)
	send(h, "/nowhere", "192.0.2.1:1234", 1)
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="unrouted"} 2
`, "reqlimit_requests_total")
}

func TestLimitsShareOneSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := promlimit.New(reg), promlimit.New(reg)
	if a != b {
		t.Fatal("a second New on the same registerer made a second set")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), a.Option())(ok))
	mux.Handle("GET /search", nethttp.Limit(500, 2*time.Second, core.WithRate(2000, 10*time.Second), fresh(), b.Option())(ok))
	// Both limits on one route, with one Option given to both: the series differ by policy.
	shared := a.Option()
	mux.Handle("GET /both", nethttp.Limit(1, time.Minute, fresh(), shared)(nethttp.Limit(2, time.Minute, fresh(), shared)(ok)))

	send(mux, "/user/1", "192.0.2.1:1234", 4)
	send(mux, "/search", "192.0.2.1:1234", 2)
	send(mux, "/both", "192.0.2.1:1234", 2)
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="1/1m",scope="GET /both"} 1
reqlimit_requests_total{outcome="refused",policy="1/1m",scope="GET /both"} 1
reqlimit_requests_total{outcome="admitted",policy="2/1m",scope="GET /both"} 1
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} 3
reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /user/{id}"} 1
reqlimit_requests_total{outcome="admitted",policy="500/2s,2000/10s",scope="GET /search"} 2
`, "reqlimit_requests_total")
}

func TestWrappedRegisterersAreSeparateSets(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := promlimit.New(prometheus.WrapRegistererWith(prometheus.Labels{"store": "a"}, reg))
	b := promlimit.New(prometheus.WrapRegistererWith(prometheus.Labels{"store": "b"}, reg))
	if a == b {
		t.Fatal("registerers with different labels share one set")
	}
	if again := promlimit.New(prometheus.WrapRegistererWith(prometheus.Labels{"store": "a"}, reg)); again != a {
		t.Error("a second New with the same labels made a second set")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /a", nethttp.Limit(3, time.Minute, fresh(), a.Option())(ok))
	mux.Handle("GET /b", nethttp.Limit(3, time.Minute, fresh(), b.Option())(ok))
	send(mux, "/a", "192.0.2.1:1234", 1)
	send(mux, "/b", "192.0.2.1:1234", 2)
	compare(t, reg, requestsHeader, `
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /a",store="a"} 1
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /b",store="b"} 2
`, "reqlimit_requests_total")
}

func TestNilRegistererIsTheDefault(t *testing.T) {
	m := promlimit.New(nil)
	if again := promlimit.New(prometheus.DefaultRegisterer); again != m {
		t.Fatal("New(nil) and New(prometheus.DefaultRegisterer) made two sets")
	}
	n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "reqlimit_store_duration_seconds")
	if err != nil || n != 1 {
		t.Errorf("the default gatherer has %d reqlimit_store_duration_seconds (%v), want 1", n, err)
	}
}

func TestNameConflictPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "reqlimit_store_duration_seconds", Help: "x"}))
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "promlimit.New") {
			t.Errorf("recovered %v, want New's panic", r)
		}
	}()
	promlimit.New(reg)
}

// TestClientsMakeNoSeries holds the cardinality promise: the client is not a label, so a
// crowd of clients adds no series.
func TestClientsMakeNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh(), m.Option())(ok))
	count := func() int {
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	send(mux, "/user/0", "192.0.2.1:1234", 4) // admitted and refused both exist
	before := count()
	const clients = 100_000
	r := httptest.NewRequest("GET", "/user/1", nil)
	for i := range clients {
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	if after := count(); after != before {
		t.Errorf("%d series after %d clients, %d before", after, clients, before)
	}
	compare(t, reg, requestsHeader, fmt.Sprintf(`
reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} %d
reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /user/{id}"} 1
`, 3+clients), "reqlimit_requests_total")
}
