package otellimit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/reqlimit/reqlimit/core"
)

func events(t testing.TB) (admitted, refused, dry, timed core.Event) {
	p, err := core.NewPolicy(core.Rate{Count: 3, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	admitted = core.Event{Outcome: core.Admitted, Scope: "GET /user/{id}", Key: "192.0.2.1", Policy: p}
	refused = admitted
	refused.Outcome = core.Refused
	dry = refused
	dry.DryRun = true
	timed = admitted
	timed.StoreTime = 300 * time.Microsecond
	return
}

func sdk() (*Metrics, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	return New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), reader
}

// TestObserveAllocatesNothing: with its series made, recording a decision allocates
// nothing, here or in the SDK's histogram that a timed decision reaches, so that the option
// adds no allocation to a limited route.
func TestObserveAllocatesNothing(t *testing.T) {
	m, reader := sdk()
	var last atomic.Pointer[series]
	admitted, refused, dry, timed := events(t)
	for _, c := range []struct {
		name string
		e    core.Event
	}{{"admitted", admitted}, {"refused", refused}, {"dry-run", dry}, {"timed", timed}} {
		m.observe(&last, &c.e) // makes the series
		if n := testing.AllocsPerRun(1000, func() { m.observe(&last, &c.e) }); n != 0 {
			t.Errorf("%s: %v allocations per decision, want 0", c.name, n)
		}
		if n := testing.AllocsPerRun(1000, func() { m.Observe(c.e) }); n != 0 {
			t.Errorf("%s through Observe: %v allocations per decision, want 0", c.name, n)
		}
	}
	// And the counts are right: admitted and timed are both admitted, each recorded
	// 1+1001+1001 times (AllocsPerRun runs its function once more before measuring).
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	const each = 1 + 2*1001
	want := map[string]int64{"admitted": 2 * each, "refused": each, "dry_run_refused": each}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "reqlimit.requests" {
			continue
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			r, _ := dp.Attributes.Value(resultKey)
			if dp.Value != want[r.AsString()] {
				t.Errorf("%s: %d, want %d", r.AsString(), dp.Value, want[r.AsString()])
			}
			delete(want, r.AsString())
		}
	}
	if len(want) != 0 {
		t.Errorf("not recorded: %v", want)
	}
}

func TestKinds(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{errors.New("boom"), kindOther},
		{nil, kindOther},
		{timeoutErr{true}, kindTimeout},
		{timeoutErr{false}, kindOther},
	} {
		if got := kind(c.err); got != c.want {
			t.Errorf("kind(%v) = %s, want %s", c.err, kindNames[got], kindNames[c.want])
		}
	}
}

type timeoutErr struct{ timeout bool }

func (e timeoutErr) Error() string { return "timeout?" }
func (e timeoutErr) Timeout() bool { return e.timeout }

func BenchmarkObserve(b *testing.B) {
	admitted, _, _, timed := events(b)
	for _, p := range []struct {
		name string
		m    *Metrics
	}{{"sdk", func() *Metrics { m, _ := sdk(); return m }()}, {"global-noop", New(nil)}} {
		for _, c := range []struct {
			name string
			e    core.Event
		}{{"admitted", admitted}, {"admitted-timed", timed}} {
			b.Run(p.name+"/"+c.name, func(b *testing.B) {
				var last atomic.Pointer[series]
				b.ReportAllocs()
				for b.Loop() {
					p.m.observe(&last, &c.e)
				}
			})
			b.Run(p.name+"/"+c.name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					var last atomic.Pointer[series]
					e := c.e
					for pb.Next() {
						p.m.observe(&last, &e)
					}
				})
			})
		}
	}
}
