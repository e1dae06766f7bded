package core_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

var countIn = adapter.Input{Route: "POST /login", Peer: "192.0.2.1:1"}

// TestCountWhenHoldsSlotsInFlight: 8 requests in flight at a limit of 5 admit 5 and refuse
// 3; the statuses then decide which slots come back.
func TestCountWhenHoldsSlotsInFlight(t *testing.T) {
	ctx := context.Background()
	var events []core.Outcome
	l, err := adapter.New(5, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed),
		core.WithObserver(func(e core.Event) { events = append(events, e.Outcome) }))
	if err != nil {
		t.Fatal(err)
	}
	var admitted []adapter.Verdict
	refused := 0
	for range 8 {
		if v := l.Check(ctx, countIn, nil); v.Allowed {
			if v.Release == nil {
				t.Fatal("an admitted request of a limit counting by outcome carries nothing to settle")
			}
			admitted = append(admitted, v)
		} else {
			refused++
		}
	}
	if len(admitted) != 5 || refused != 3 {
		t.Fatalf("in flight: %d admitted, %d refused, want 5 and 3", len(admitted), refused)
	}
	for i, v := range admitted {
		status := 200 // given back
		if i < 3 {
			status = 401 // counts
		}
		l.Settle(ctx, v, status)
	}
	got := []bool{}
	for range 3 {
		got = append(got, l.Check(ctx, countIn, nil).Allowed)
	}
	if !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("after 3 failures and 2 successes: %v, want two admitted then refused", got)
	}
	if n := strings.Count(fmtOutcomes(events), "released"); n != 2 {
		t.Fatalf("observer saw %d released, want 2: %s", n, fmtOutcomes(events))
	}
}

func fmtOutcomes(os []core.Outcome) string {
	var b strings.Builder
	for _, o := range os {
		b.WriteString(o.String() + " ")
	}
	return b.String()
}

// TestCountWhenVirtualSchedule plays random overlapping requests on one key on a virtual
// clock (arrivals, and handlers finishing with random statuses, in random order) and
// checks the grants against the whole history: at most N counted grant times in any
// window, at most N held (in flight or counted) at each decision, and no refusal while
// fewer than N were held in the window (every request that fits is admitted).
func TestCountWhenVirtualSchedule(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		count  int
		period time.Duration
		rule   func(int) bool
	}{
		{5, time.Second, core.Failed},
		{5, time.Second, core.Succeeded},
		{3, 200 * time.Millisecond, core.Failed},
		{300, time.Second, core.Failed}, // bounded: strict, admits within a granule
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.count), uint64(tc.period)))
		clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
		l, err := adapter.New(tc.count, tc.period, core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})), core.WithCountWhen(tc.rule))
		if err != nil {
			t.Fatal(err)
		}
		type req struct {
			v       adapter.Verdict
			at      time.Time
			counted bool
			done    bool
		}
		var reqs []*req
		var counted []time.Time
		held := func(now time.Time) int { // grants the key holds now: in flight, or counted, in the window
			n := 0
			for _, r := range reqs {
				if r.at.After(now.Add(-tc.period)) && (!r.done || r.counted) {
					n++
				}
			}
			return n
		}
		released, refusals := 0, 0
		for step := range 3000 {
			clock.Advance(time.Duration(rng.Int64N(int64(tc.period) / int64(tc.count) / 2)))
			now := clock.Now()
			if pending := slices.IndexFunc(reqs, func(r *req) bool { return !r.done }); pending >= 0 && rng.IntN(2) == 0 {
				// A handler finishes: any request in flight, not only the oldest.
				var open []*req
				for _, r := range reqs {
					if !r.done {
						open = append(open, r)
					}
				}
				r := open[rng.IntN(len(open))]
				status := []int{200, 201, 302, 400, 401, 500}[rng.IntN(6)]
				r.done, r.counted = true, tc.rule(status)
				l.Settle(ctx, r.v, status)
				if r.counted {
					counted = append(counted, r.at)
				} else {
					released++
				}
				continue
			}
			h := held(now)
			v := l.Check(ctx, countIn, nil)
			if v.Allowed {
				if h >= tc.count {
					t.Fatalf("%d/%v step %d: admitted with %d held", tc.count, tc.period, step, h)
				}
				reqs = append(reqs, &req{v: v, at: now})
				continue
			}
			refusals++
			if slack := tc.period / bounds.Buckets; tc.count <= bounds.LargestExact && h < tc.count {
				t.Fatalf("%d/%v step %d: refused with only %d held", tc.count, tc.period, step, h)
			} else if tc.count > bounds.LargestExact && held(now.Add(-slack)) < tc.count-1 && h < tc.count {
				t.Fatalf("%d/%v step %d: refused with %d held, %d a granule ago", tc.count, tc.period, step, h, held(now.Add(-slack)))
			}
		}
		if worst := maxInAnyWindowT(counted, tc.period); worst > tc.count {
			t.Fatalf("%d/%v: %d counted grants in one window", tc.count, tc.period, worst)
		}
		if released == 0 || refusals == 0 {
			t.Fatalf("%d/%v: %d released, %d refused: the schedule tested little", tc.count, tc.period, released, refusals)
		}
	}
}

func maxInAnyWindowT(ts []time.Time, T time.Duration) int {
	ns := make([]int64, len(ts))
	for i, x := range ts {
		ns[i] = x.UnixNano()
	}
	return maxInAnyWindow(ns, T)
}

// TestCountWhenRealClockStrict: 8 goroutines on one key, on the real clock, handlers of
// random length answering random statuses: no interval of the period holds more than N
// counted requests (by their whole call spans, so a slow machine can only make the count
// smaller), and slots given back were granted again.
func TestCountWhenRealClockStrict(t *testing.T) {
	const n, per, workers = 5, 100 * time.Millisecond, 8
	ctx := context.Background()
	l, err := adapter.New(n, per, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var counted []storetest.Call
	admitted, released := 0, 0
	var wg sync.WaitGroup
	// The workers run for 8 periods, and on (for at most 10 s) until a request was given
	// back and one counted: a machine stalled through most of the 8 periods would leave
	// too few requests to check.
	deadline, last := time.Now().Add(8*per), time.Now().Add(10*time.Second)
	more := func() bool {
		switch now := time.Now(); {
		case now.Before(deadline):
			return true
		case !now.Before(last):
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return released == 0 || len(counted) == 0
	}
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for more() {
				start := time.Now()
				v := l.Check(ctx, countIn, nil)
				end := time.Now()
				if !v.Allowed {
					time.Sleep(time.Millisecond)
					continue
				}
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				status := 200
				if rng.IntN(2) == 0 {
					status = 403
				}
				l.Settle(ctx, v, status)
				mu.Lock()
				admitted++
				if status == 403 {
					counted = append(counted, storetest.Call{Start: start, End: end})
				} else {
					released++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if worst := storetest.MaxInWindow(counted, per); worst > n {
		t.Fatalf("%d counted requests inside one %v interval, limit %d", worst, per, n)
	}
	if released == 0 || len(counted) == 0 {
		t.Fatalf("%d admitted, %d given back, %d counted: nothing to check", admitted, released, len(counted))
	}
	t.Logf("%d admitted, %d given back, %d counted", admitted, released, len(counted))
}

// TestCountWhenReleaseFailureCounts: a store that fails to give a slot back leaves it
// counted, and the error hook hears of it.
func TestCountWhenReleaseFailureCounts(t *testing.T) {
	ctx := context.Background()
	var hooked []error
	st := &flakyReleaser{MemoryStore: core.NewMemoryStore(nil)}
	l, err := adapter.New(2, time.Minute, core.WithStore(st), core.WithCountWhen(core.Failed),
		core.WithErrorHook(func(_ context.Context, err error) { hooked = append(hooked, err) }))
	if err != nil {
		t.Fatal(err)
	}
	st.fail = true
	l.Settle(ctx, l.Check(ctx, countIn, nil), 200)
	l.Settle(ctx, l.Check(ctx, countIn, nil), 200)
	if v := l.Check(ctx, countIn, nil); v.Allowed {
		t.Fatal("admitted although the slots given back failed to leave the store")
	}
	if len(hooked) != 2 || !strings.Contains(hooked[0].Error(), "status 200") || !errors.Is(hooked[0], errReleaseDown) {
		t.Fatalf("error hook: %v", hooked)
	}
}

var errReleaseDown = errors.New("connection refused")

type flakyReleaser struct {
	*core.MemoryStore
	fail bool
}

func (s *flakyReleaser) Release(ctx context.Context, q core.Query, grant int64) error {
	if s.fail {
		return errReleaseDown
	}
	return s.MemoryStore.Release(ctx, q, grant)
}

// TestCountWhenFailLocal: a grant the local fallback store recorded (the store being down)
// is given back there. Observers saw it Errored, not Admitted, so its release is not
// reported Released: that follows Admitted only (admitted less released went negative).
func TestCountWhenFailLocal(t *testing.T) {
	ctx := context.Background()
	outcomes := map[core.Outcome]int{}
	l, err := adapter.New(1, time.Minute, core.WithStore(downReleaser{}), core.WithFailMode(core.FailLocal),
		core.WithCountWhen(core.Failed), core.WithErrorHook(func(context.Context, error) {}),
		core.WithObserver(func(e core.Event) { outcomes[e.Outcome]++ }))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		v := l.Check(ctx, countIn, nil)
		if !v.Allowed {
			t.Fatalf("request %d refused: the local store's grant was not given back", i+1)
		}
		l.Settle(ctx, v, 200)
	}
	if outcomes[core.Released] > outcomes[core.Admitted] {
		t.Fatalf("observed %v: more released than admitted", outcomes)
	}
	l.Settle(ctx, l.Check(ctx, countIn, nil), 401)
	if l.Check(ctx, countIn, nil).Allowed {
		t.Fatal("a failure did not count in the local store")
	}
}

type downReleaser struct{ downStore }

func (downReleaser) Release(context.Context, core.Query, int64) error { return errReleaseDown }
