package main

import (
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core/storetest"
)

func TestExactAdmitsByHand(t *testing.T) {
	for _, c := range []struct {
		name     string
		arrivals []int64
		n        int
		w        int64
		want     int
	}{
		{"empty", nil, 2, 10, 0},
		{"under the limit", []int64{0, 5, 20}, 2, 10, 3},
		// 2 is refused (0 and 1 lie in (-8, 2]); at 10 grant 0 has left (0, 10], at 11
		// grant 1 has left (1, 11], and at 12 the window (2, 12] holds 10 and 11.
		{"window edges", []int64{0, 1, 2, 10, 11, 12}, 2, 10, 4},
		// A grant leaves the window exactly T later: (t-T, t] excludes t-T.
		{"slot frees at T", []int64{0, 10, 19, 20}, 1, 10, 3},
		// Refusals are not recorded: a freed slot goes to the next arrival.
		{"constant overload", seq(0, 100, 1), 10, 20, 50},
		{"simultaneous", []int64{7, 7, 7, 7}, 3, 10, 3},
	} {
		if got := exactAdmits(c.arrivals, c.n, c.w); got != c.want {
			t.Errorf("%s: exactAdmits = %d, want %d", c.name, got, c.want)
		}
	}
}

func seq(from, to, step int64) []int64 {
	var s []int64
	for t := from; t < to; t += step {
		s = append(s, t)
	}
	return s
}

// TestResultCountsWholeSpans checks the strictness count on hand-made spans: a call counts
// in an interval only if its whole span lies inside, so a late answer cannot inflate it.
func TestResultCountsWholeSpans(t *testing.T) {
	base := time.Now()
	at := func(ms float64) time.Time { return base.Add(time.Duration(ms * float64(time.Millisecond))) }
	span := func(s, e float64) storetest.Call { return storetest.Call{Start: at(s), End: at(e)} }
	tr := &trace{base: base, calls: 6, admitted: []storetest.Call{
		span(0, 10), span(500, 510), span(990, 1010), // the third ends after 0+1 s
		span(1005, 1006),
	}}
	for _, c := range tr.admitted {
		tr.arrivals = append(tr.arrivals, int64(c.Start.Sub(base)))
	}
	tr.arrivals = append(tr.arrivals, int64(600*time.Millisecond), int64(2000*time.Millisecond))
	r := tr.result(3, time.Second)
	// [500 ms, 1500 ms) holds the last three whole; no interval holds all four.
	if r.maxIn != 3 {
		t.Errorf("maxIn = %d, want 3", r.maxIn)
	}
	if r2 := tr.result(2, time.Second); r2.maxIn != 3 {
		t.Errorf("maxIn does not depend on the limit: got %d", r2.maxIn)
	}
	// The exact log of 3 per s admits every one of the six arrivals but the one at
	// 990 ms: (-10 ms, 990 ms] already holds 0, 500 and 600.
	if r.exact != 5 || r.admitted != 4 || r.util != 80 {
		t.Errorf("exact %d, admitted %d, util %.1f; want 5, 4, 80", r.exact, r.admitted, r.util)
	}
	// A late answer only shrinks the count: the call at 500 ms, answered at 2500 ms, no
	// longer fits in any interval with the others.
	tr.admitted[1] = span(500, 2500)
	if r := tr.result(3, time.Second); r.maxIn != 2 {
		t.Errorf("with a late answer maxIn = %d, want 2", r.maxIn)
	}
}

func TestSchedules(t *testing.T) {
	if s := steadySchedule(8*time.Millisecond, time.Second); len(s) != 125 || s[124] != 992*time.Millisecond {
		t.Errorf("steady: %d arrivals, last %v; want 125, last 992ms", len(s), s[len(s)-1])
	}
	a, b := burstSchedule(1, 3*time.Second), burstSchedule(1, 3*time.Second)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave two burst plans: limiters would not share a schedule")
	}
	if slices.Equal(a, burstSchedule(2, 3*time.Second)) {
		t.Error("the seed does not change the burst plan")
	}
	if !slices.IsSorted(a) || len(a) < 100 {
		t.Errorf("burst plan: %d arrivals, sorted %v", len(a), slices.IsSorted(a))
	}
}

// TestScenarioTellsStrictFromLoose runs a short steady scenario through the real harness
// with a small limit: reqlimit must keep it and fill it, x/time/rate (a token bucket: burst
// plus refill) must be caught exceeding it. If the harness could not see a broken limit,
// the whole comparison would be worthless.
func TestScenarioTellsStrictFromLoose(t *testing.T) {
	const n, w = 10, 100 * time.Millisecond
	schedule := steadySchedule(2*time.Millisecond, 450*time.Millisecond)
	byName := map[string]peer{}
	for _, p := range peers() {
		byName[p.name] = p
	}
	run := func(name string) result {
		allow, err := byName[name].newAllow(n, w)
		if err != nil {
			t.Fatal(err)
		}
		return runSchedule(allow, benchKey, schedule, 2*time.Second).result(n, w)
	}
	// The exact log replays call starts, while reqlimit decides a little later in each
	// call, so under load a freed slot can go to a call the replay saw just before it
	// freed: a few percent either way, never a count above n.
	if r := run("reqlimit `Decide` (memory)"); r.maxIn > n || r.util < 95 || r.util > 105 {
		t.Errorf("reqlimit: max %d in %v (limit %d), %.1f%% of exact; want at most %d and about 100%%", r.maxIn, w, n, r.util, n)
	}
	if r := run("x/time/rate"); r.maxIn <= n || r.util <= 100 {
		t.Errorf("x/time/rate: max %d in %v, %.1f%% of exact; the harness should catch burst plus refill above %d", r.maxIn, w, r.util, n)
	}
}

// TestMiddlewarePeersAdmitThenRefuse drives every middleware peer through its framework's
// harness: 3 per minute admits three requests from a client, refuses the fourth with 429
// and still admits another client; and each framework has a bare route that answers 2xx.
// A harness that lost the status or the client address would fail here, not in a long run.
func TestMiddlewarePeersAdmitThenRefuse(t *testing.T) {
	frameworks := map[string]bool{}
	for _, p := range peers() {
		if p.framework == "" {
			continue
		}
		frameworks[p.framework] = true
		allow, err := p.newAllow(3, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		for i, want := range []bool{true, true, true, false} {
			if ok, err := allow(benchKey); err != nil || ok != want {
				t.Errorf("%s: request %d: admitted %v, error %v; want %v", p.name, i+1, ok, err, want)
			}
		}
		if ok, err := allow("192.0.2.2"); err != nil || !ok {
			t.Errorf("%s: another client: admitted %v, error %v; want its own quota", p.name, ok, err)
		}
	}
	for _, f := range []string{"net/http", "Echo v4", "Echo v5", "Fiber v2", "Fiber v3"} {
		if !frameworks[f] {
			t.Errorf("no middleware peer on %s", f)
		}
	}
	for f := range frameworks {
		bare, ok := bareRoutes[f]
		if !ok {
			t.Errorf("%s: no bare route", f)
			continue
		}
		if ok, err := bare()(benchKey); err != nil || !ok {
			t.Errorf("%s: bare route: admitted %v, error %v", f, ok, err)
		}
	}
}
