package promlimit

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

// TestObserveAllocatesNothing: with its series made, recording a decision allocates
// nothing, so that the option adds no allocation to a limited route.
func TestObserveAllocatesNothing(t *testing.T) {
	m := New(prometheus.NewRegistry())
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
	// And the counts are right: the last event of each was recorded 1+1000+1000 times
	// (AllocsPerRun runs its function once more before measuring).
	const each = 1 + 2*1001
	if got := testutil.ToFloat64(m.requests.WithLabelValues("GET /user/{id}", "3/1m", "admitted")); got != 2*each {
		t.Errorf("admitted %v, want %v", got, 2*each)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("GET /user/{id}", "3/1m", "dry_run_refused")); got != each {
		t.Errorf("dry_run_refused %v, want %v", got, each)
	}
	if got := testutil.CollectAndCount(m.duration); got != 1 {
		t.Errorf("%d duration series, want 1", got)
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
	m := New(prometheus.NewRegistry())
	admitted, _, _, timed := events(b)
	for _, c := range []struct {
		name string
		e    core.Event
	}{{"admitted", admitted}, {"admitted-timed", timed}} {
		b.Run(c.name, func(b *testing.B) {
			var last atomic.Pointer[series]
			b.ReportAllocs()
			for b.Loop() {
				m.observe(&last, &c.e)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var last atomic.Pointer[series]
				e := c.e
				for pb.Next() {
					m.observe(&last, &e)
				}
			})
		})
	}
}
