// Package storetest is the conformance suite every core.Store must pass: the same
// scenarios run against the in-memory store, Redis standalone and Redis Cluster, so the
// stores cannot drift apart.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/policytest"
)

// A Harness is a store under test and a way to let time pass for it.
type Harness struct {
	Store core.Store // the store under test; Run asks newHarness for one per scenario
	// Advance lets d pass on the store's clock. Nil means the store keeps real time, and
	// the suite sleeps instead (with windows short enough to keep that quick).
	Advance func(d time.Duration)
	// Rounding is how much later than the exact sliding log a store that rounds times
	// (to milliseconds, say) may grant a freed slot and so report a wait, on real time;
	// 0 for a store that keeps times exactly, to the microsecond.
	Rounding time.Duration
}

// Run runs every scenario, each on a fresh harness from newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, newHarness(t)) })
	}
}

var scenarios = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"AdmitsCountThenRefuses", admitsCountThenRefuses},
	{"RetryAfterFromGrants", retryAfterFromGrants},
	{"Isolation", isolation},
	{"AwkwardKeys", awkwardKeys},
	{"SeveralRates", severalRates},
	{"Cost", cost},
	{"Penalty", penalty},
	{"Peek", peek},
	{"ConcurrentStrict", concurrentStrict},
	{"Counter", counter},
	{"Reset", reset},
	{"Release", release},
	{"ReleaseConcurrent", releaseConcurrent},
}

// window is the first attempt's window (see retry).
const window = 400 * time.Millisecond

// attempts bounds how often a scenario on real time starts over because the machine was
// too slow for its checks to say anything (see retry).
const attempts = 4

// A timeline is one attempt's time: the harness's virtual time, or real time since the
// attempt began. On real time the suite never assumes how long a call or a sleep takes:
// it reads the clock around each call, and bounds what the store may answer by what it
// read, so a slow machine widens the bounds exactly as far as it was slow.
type timeline struct {
	h     Harness
	start time.Time
	virt  time.Duration
}

func (tl *timeline) now() time.Duration {
	if tl.h.Advance != nil {
		return tl.virt
	}
	return time.Since(tl.start)
}

// wait lets at least d pass.
func (tl *timeline) wait(d time.Duration) {
	if tl.h.Advance != nil {
		tl.h.Advance(d)
		tl.virt += d
		return
	}
	time.Sleep(d)
}

// tol is the rounding a real-time store may add: Redis reads its own clock, in whole
// microseconds. A virtual clock is exact.
func (tl *timeline) tol() time.Duration {
	if tl.h.Advance != nil {
		return 0
	}
	return time.Millisecond + tl.h.Rounding
}

// A span is when a call ran, on its timeline: the store decided at some instant in it.
type span struct{ from, to time.Duration }

func (sp span) String() string { return fmt.Sprintf("[%v, %v]", sp.from, sp.to) }

// decide decides q and reports when.
func (tl *timeline) decide(t *testing.T, q core.Query) (core.Decision, span) {
	t.Helper()
	from := tl.now()
	d := decide(t, tl.h, q)
	return d, span{from, tl.now()}
}

// timed runs f and reports when.
func (tl *timeline) timed(f func()) span {
	from := tl.now()
	f()
	return span{from, tl.now()}
}

// until returns the bounds of what a store may report, at a decision made in r, as the
// time left until w after an event in g: an instant of g plus w, less an instant of r.
func (tl *timeline) until(g span, w time.Duration, r span) (lo, hi time.Duration) {
	return g.from + w - r.to - tl.tol(), g.to + w - r.from + tl.tol()
}

// inTime reports whether every call from first to last ran within w: then nothing the
// first recorded has left the window when the last is decided. When a scenario's checks
// need that and the machine was too slow, it logs why and the attempt says nothing.
func (tl *timeline) inTime(t *testing.T, what string, first, last span, w time.Duration) bool {
	t.Helper()
	if last.to-first.from < w {
		return true
	}
	t.Logf("%s: calls from %v to %v do not fit in the %v window: too slow to check; again", what, first, last, w)
	return false
}

// retry runs attempts of a scenario, each on a fresh timeline, its own keys (key adds the
// attempt's suffix to a name) and a window twice the last, until one reports that the
// machine kept the pace its checks need. Only that may start an attempt over: a check
// whose premise held and which fails, fails the test at once, so no violation of a limit
// can be retried away. A virtual clock always keeps the pace.
func retry(t *testing.T, h Harness, run func(tl *timeline, w time.Duration, key func(string) string) bool) {
	t.Helper()
	w := window
	for i := 1; ; i++ {
		suffix := "#" + strconv.Itoa(i)
		if run(&timeline{h: h, start: time.Now()}, w, func(k string) string { return k + suffix }) {
			return
		}
		if h.Advance != nil {
			t.Fatal("an attempt on a virtual clock did not keep the pace: the scenario is wrong")
		}
		if i == attempts {
			t.Fatalf("%d attempts, the last with a %v window, and the machine never kept the pace the checks need", i, w)
		}
		w *= 2
	}
}

func decide(t *testing.T, h Harness, q core.Query) core.Decision {
	t.Helper()
	d, err := h.Store.Decide(context.Background(), q)
	if err != nil {
		t.Fatalf("Decide(%s %q %q cost %d): %v", q.Policy, q.Scope, q.Key, q.Cost, err)
	}
	return d
}

func admitsCountThenRefuses(t *testing.T, h Harness) {
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		p := mustPolicy(core.Rate{Count: 3, Period: w})
		q := core.Query{Policy: p, Scope: "GET /user/test", Key: key("192.0.2.1")}
		var ds [4]core.Decision
		var at [4]span
		for i := range ds {
			ds[i], at[i] = tl.decide(t, q)
		}
		if !tl.inTime(t, "four requests", at[0], at[3], w) {
			return false
		}
		for i, d := range ds[:3] {
			if !d.Allowed || d.Remaining != 2-i || d.Rate != (core.Rate{Count: 3, Period: w}) || d.RetryAfter != 0 {
				t.Fatalf("request %d: got %+v, want admitted with %d remaining of 3 per %v", i+1, d, 2-i, w)
			}
			// The newest grant is this one: the quota is whole one window from now; it
			// next grows when the first grant leaves.
			if d.FullReset < w-tl.tol() || d.FullReset > w+tl.h.Rounding {
				t.Fatalf("request %d: FullReset %v, want %v", i+1, d.FullReset, w)
			}
			if lo, hi := tl.until(at[0], w, at[i]); d.Reset < lo || d.Reset > hi {
				t.Fatalf("request %d: Reset %v, want the first grant's (at %v) end: in [%v, %v]", i+1, d.Reset, at[0], lo, hi)
			}
		}
		d := ds[3]
		lo, hi := tl.until(at[0], w, at[3])
		if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > w+tl.h.Rounding || d.RetryAfter < lo || d.RetryAfter > hi {
			t.Fatalf("request 4 at %v: got %+v, want refused until the first grant (at %v) is %v old: RetryAfter in [%v, %v]", at[3], d, at[0], w, lo, hi)
		}
		if d.Reset != d.RetryAfter {
			t.Fatalf("request 4: Reset %v, want RetryAfter %v: the quota next grows when the first grant leaves", d.Reset, d.RetryAfter)
		}
		if lo, hi := tl.until(at[2], w, at[3]); d.FullReset < lo || d.FullReset > hi {
			t.Fatalf("request 4: FullReset %v, want the newest grant's (at %v) end: in [%v, %v]", d.FullReset, at[2], lo, hi)
		}
		return true
	})
}

func retryAfterFromGrants(t *testing.T, h Harness) {
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		q := core.Query{Policy: mustPolicy(core.Rate{Count: 2, Period: w}), Key: key("k")}
		_, first := tl.decide(t, q)
		tl.wait(w / 2)
		_, second := tl.decide(t, q)
		d, at := tl.decide(t, q)
		if !tl.inTime(t, "the refusal", first, at, w) {
			return false
		}
		// The first grant leaves the window half a window from now, not a whole one.
		if lo, hi := tl.until(first, w, at); d.Allowed || d.RetryAfter < lo || d.RetryAfter > hi {
			t.Fatalf("third request at %v: got %+v, want refused until the first grant (at %v) is %v old: RetryAfter in [%v, %v]", at, d, first, w, lo, hi)
		}
		if d.Reset != d.RetryAfter {
			t.Fatalf("Reset %v, want RetryAfter %v: the quota next grows when the first grant leaves", d.Reset, d.RetryAfter)
		}
		if lo, hi := tl.until(second, w, at); d.FullReset < lo || d.FullReset > hi {
			t.Fatalf("FullReset %v, want the newest grant's (at %v) end: in [%v, %v]", d.FullReset, second, lo, hi)
		}
		// Waiting RetryAfter from the reply is waiting at least that from the decision.
		tl.wait(d.RetryAfter + tl.tol())
		if d, at := tl.decide(t, q); !d.Allowed {
			t.Fatalf("at %v, after RetryAfter %v: got %+v, want admitted", at, d.RetryAfter, d)
		}
		d, last := tl.decide(t, q)
		if !tl.inTime(t, "the second grant", second, last, w) {
			return false
		}
		if d.Allowed {
			t.Fatalf("the slot freed by time went to one request, yet a second was admitted at %v: %+v", last, d)
		}
		return true
	})
}
func isolation(t *testing.T, h Harness) {
	p := mustPolicy(core.Rate{Count: 1, Period: time.Hour})
	other := mustPolicy(core.Rate{Count: 2, Period: time.Hour})
	base := core.Query{Policy: p, Scope: "/a", Key: "10.0.0.1"}
	variants := []core.Query{
		base,
		{Policy: p, Scope: "/b", Key: "10.0.0.1"},
		{Policy: p, Scope: "/a", Key: "10.0.0.2"},
		{Policy: other, Scope: "/a", Key: "10.0.0.1"},
		{Policy: p, Scope: "/a10.0.0.1", Key: ""},
		{Policy: p, Scope: "", Key: "/a10.0.0.1"},
	}
	// Each variant's whole quota: a bucket shared with another variant, whatever their
	// policies, holds its grants too and refuses one of them.
	for i, q := range variants {
		for j := range q.Policy.Rates()[0].Count {
			if d := decide(t, h, q); !d.Allowed {
				t.Fatalf("variant %d (%s %q %q): request %d refused, so it shares a bucket: %+v", i, q.Policy, q.Scope, q.Key, j+1, d)
			}
		}
	}
	if d := decide(t, h, core.Query{Policy: mustParse("1/1h"), Scope: "/a", Key: "10.0.0.1"}); d.Allowed {
		t.Fatalf("an equal policy parsed anew must share the bucket, got %+v", d)
	}
}

func awkwardKeys(t *testing.T, h Harness) {
	p := mustPolicy(core.Rate{Count: 1, Period: time.Hour})
	keys := []string{"{a}", "{a", "a}", "}{", "{}", "{{}}", "spaces in key", "ключ 🔑", strings.Repeat("x", 10_000), strings.Repeat("{y}", 3000), "\x00nul\x00", ""}
	for _, k := range keys {
		for _, scope := range []string{"/r", "{a}", "GET /u/{id}"} {
			q := core.Query{Policy: p, Scope: scope, Key: k}
			if d := decide(t, h, q); !d.Allowed {
				t.Fatalf("key %.40q scope %q: first request refused: %+v", k, scope, d)
			}
			if d := decide(t, h, q); d.Allowed {
				t.Fatalf("key %.40q scope %q: second request admitted under 1 per hour", k, scope)
			}
		}
	}
}

func severalRates(t *testing.T, h Harness) {
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		p := mustPolicy(core.Rate{Count: 2, Period: w / 4}, core.Rate{Count: 3, Period: w})
		q := core.Query{Policy: p, Key: key("k")}
		_, first := tl.decide(t, q)
		if d, _ := tl.decide(t, q); !d.Allowed {
			t.Fatalf("second request refused: %+v", d)
		}
		d, at := tl.decide(t, q)
		if !tl.inTime(t, "the third request", first, at, w/4) {
			return false
		}
		if d.Allowed || d.Rate != p.Rates()[0] {
			t.Fatalf("third request at once: got %+v, want refused by the 2-per-%v rate", d, w/4)
		}
		tl.wait(w/4 + tl.tol())
		d, at = tl.decide(t, q)
		if !tl.inTime(t, "the fourth request", first, at, w) {
			return false
		}
		if !d.Allowed || d.Rate != p.Rates()[1] || d.Remaining != 0 {
			t.Fatalf("after the short window: got %+v, want admitted with the long rate exhausted", d)
		}
		tl.wait(w/4 + tl.tol())
		d, at = tl.decide(t, q)
		if !tl.inTime(t, "the fifth request", first, at, w) {
			return false
		}
		if lo, hi := tl.until(first, w, at); d.Allowed || d.Rate != p.Rates()[1] || d.RetryAfter < lo || d.RetryAfter > hi {
			t.Fatalf("short rate has room but long is full: got %+v, want refused by rate 1 until the first grant (at %v) is %v old: RetryAfter in [%v, %v]", d, first, w, lo, hi)
		}
		// A refusal by one rate records nothing in the other.
		tl.wait(d.RetryAfter + tl.tol())
		if d := decide(t, h, q); !d.Allowed {
			t.Fatalf("after RetryAfter: got %+v, want admitted", d)
		}
		return true
	})
}

func cost(t *testing.T, h Harness) {
	p := mustPolicy(core.Rate{Count: 3, Period: time.Hour})
	q := core.Query{Policy: p, Key: "k", Cost: 2}
	if d := decide(t, h, q); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("cost 2 of 3: got %+v, want admitted with 1 left", d)
	}
	if d := decide(t, h, q); d.Allowed || d.Remaining != 1 {
		t.Fatalf("cost 2 with 1 left: got %+v, want refused, 1 left", d)
	}
	q.Cost = 1
	if d := decide(t, h, q); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("cost 1 with 1 left: got %+v, want admitted", d)
	}
	q.Cost = 4
	_, err := h.Store.Decide(context.Background(), q)
	if !errors.Is(err, core.ErrCostTooHigh) {
		t.Fatalf("cost 4 of 3: err %v, want ErrCostTooHigh", err)
	}
	// A cost below 1 counts as 1: never free, never a refund.
	for _, c := range []int{0, -1, math.MinInt} {
		q := core.Query{Policy: p, Key: "below-one-" + strconv.Itoa(c), Cost: c}
		for i := range 4 {
			if d := decide(t, h, q); d.Allowed != (i < 3) || d.Allowed && d.Remaining != 2-i {
				t.Fatalf("cost %d, request %d of 3/1h: got %+v, want counted as cost 1", c, i+1, d)
			}
		}
	}
}

func penalty(t *testing.T, h Harness) {
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		p := mustPolicy(core.Rate{Count: 2, Period: w})
		enforce := core.Query{Policy: p, Key: key("calm")}
		punish := core.Query{Policy: p, Key: key("hammer"), Mode: core.Penalty}
		var firsts [2]span
		for i, q := range []core.Query{enforce, punish} {
			_, firsts[i] = tl.decide(t, q)
			decide(t, h, q)
		}
		tl.wait(w / 2)
		// Two refusals each: penalty mode records both, filling the window again.
		var refused [2][2]core.Decision
		var punished span
		for i, q := range []core.Query{enforce, punish} {
			for j := range 2 {
				var at span
				refused[i][j], at = tl.decide(t, q)
				if !tl.inTime(t, q.Key+"'s refusals", firsts[i], at, w) {
					return false
				}
				if i == 1 && j == 0 {
					punished = at
				}
			}
		}
		for i, q := range []core.Query{enforce, punish} {
			for _, d := range refused[i] {
				if d.Allowed {
					t.Fatalf("%s: admitted a third request", q.Key)
				}
			}
		}
		tl.wait(w/2 + tl.tol())
		if d := decide(t, h, enforce); !d.Allowed {
			t.Fatalf("enforce: refusals must not be recorded, got %+v", d)
		}
		d, at := tl.decide(t, punish)
		if !tl.inTime(t, "the recorded refusals", punished, at, w) {
			return false
		}
		if d.Allowed {
			t.Fatalf("penalty: the refusals half a window ago must still count, got %+v", d)
		}
		return true
	})
}

func peek(t *testing.T, h Harness) {
	p := mustPolicy(core.Rate{Count: 2, Period: time.Hour})
	q := core.Query{Policy: p, Key: "k", Mode: core.Peek}
	for range 5 {
		if d := decide(t, h, q); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("peek recorded something: %+v", d)
		}
	}
	q.Mode = core.Enforce
	decide(t, h, q)
	q.Mode = core.Peek
	if d := decide(t, h, q); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("peek after one grant: got %+v, want 1 remaining", d)
	}
	// What Enforce would decide, refusals included.
	q.Cost = 2
	if d := decide(t, h, q); d.Allowed || d.Remaining != 1 || d.RetryAfter <= 0 {
		t.Fatalf("peek of cost 2 with 1 left: got %+v, want refused with a wait", d)
	}
	q.Cost, q.Mode = 1, core.Enforce
	decide(t, h, q)
	q.Mode = core.Peek
	for range 2 {
		if d := decide(t, h, q); d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
			t.Fatalf("peek with the quota used: got %+v, want refused with a wait", d)
		}
	}
}

// concurrentStrict hammers one key from many goroutines and checks, from the callers'
// side, that no interval of length T held more than N grants whose whole call fell inside,
// and that no refusal came while the key had room: both from the calls' own times, so a
// slow machine can only make the calls fewer, never the checks wrong.
func concurrentStrict(t *testing.T, h Harness) {
	const n, workers, sample = 20, 8, 4096
	if h.Advance != nil {
		t.Skip("needs real time")
	}
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		per := w / 4
		p := mustPolicy(core.Rate{Count: n, Period: per})
		q := core.Query{Policy: p, Key: key("hot")}
		var mu sync.Mutex
		var grants, refusals []Call
		var wg sync.WaitGroup
		deadline := time.Now().Add(5 * per)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A uniform sample of this worker's refusals: all of them would be too many
				// to keep on a fast machine.
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				var mine []Call
				seen := 0
				defer func() {
					mu.Lock()
					refusals = append(refusals, mine...)
					mu.Unlock()
				}()
				for time.Now().Before(deadline) {
					start := time.Now()
					d, err := h.Store.Decide(context.Background(), q)
					end := time.Now()
					if err != nil {
						t.Error(err)
						return
					}
					c := Call{start, end}
					if d.Allowed {
						mu.Lock()
						grants = append(grants, c)
						mu.Unlock()
						continue
					}
					if seen++; len(mine) < sample {
						mine = append(mine, c)
					} else if i := rng.IntN(seen); i < sample {
						mine[i] = c
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if worst := MaxInWindow(grants, per); worst > n {
			t.Fatalf("%d grants fell inside one %v interval, limit %d", worst, per, n)
		}
		if bad := RefusedWithRoom(grants, refusals, n, per+tl.tol()); len(bad) > 0 {
			t.Fatalf("%d of %d refusals (a sample) came while fewer than %d grants could have been in the %v before them: slots freed by time were not granted again; the first: %v", len(bad), len(refusals), n, per, bad[0])
		}
		if len(refusals) == 0 || len(grants) <= n {
			t.Logf("%d grants and %d refusals in %v under %d per %v: the key was not contended enough to show slots freed by time granted again; again", len(grants), len(refusals), 5*per, n, per)
			return false
		}
		return true
	})
}

// A Call is the span of one call (a grant or a refusal), as its caller saw it.
type Call struct {
	Start, End time.Time // when the caller sent the call, and when its reply arrived
}

// MaxInWindow returns the largest number of calls whose whole span lies inside one
// interval [a, a+w). A reply delay can only shrink the count, never inflate it, so a
// result above the limit proves the limit was broken. O(n log n + n·k).
func MaxInWindow(calls []Call, w time.Duration) int {
	cs := append([]Call(nil), calls...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Start.Before(cs[j].Start) })
	best := 0
	for i := range cs {
		// The best interval can start at some call's start.
		a := cs[i].Start
		n := 0
		for j := i; j < len(cs) && cs[j].Start.Sub(a) < w; j++ {
			if cs[j].End.Sub(a) < w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// RefusedWithRoom returns the refusals that came while the limit had room: fewer than n of
// the grants could have been decided in the w before any instant of the refusal's call.
// A grant may count when its own call overlaps (refusal.Start - w, refusal.End], so slow
// calls can only add to the count, and a refusal returned proves the store refused while
// a slot was free. grants must hold every grant of the key (of cost 1); refusals may be a
// sample. O((g + r) log g).
func RefusedWithRoom(grants, refusals []Call, n int, w time.Duration) []Call {
	starts := make([]time.Time, len(grants))
	ends := make([]time.Time, len(grants))
	for i, g := range grants {
		starts[i], ends[i] = g.Start, g.End
	}
	byTime := func(ts []time.Time) { sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) }) }
	byTime(starts)
	byTime(ends)
	var bad []Call
	for _, r := range refusals {
		// Grants that began by the refusal's end, less those over before its start less w
		// (which began by then too).
		began := sort.Search(len(starts), func(i int) bool { return starts[i].After(r.End) })
		over := sort.Search(len(ends), func(i int) bool { return ends[i].After(r.Start.Add(-w)) })
		if began-over < n {
			bad = append(bad, r)
		}
	}
	return bad
}

// String makes a Call print readably in failures.
func (c Call) String() string {
	return fmt.Sprintf("[%v, %v]", c.Start.Format(time.StampMicro), c.End.Format(time.StampMicro))
}

// counter runs a core.Counter on the store: events slide out of the window, counts
// saturate at the capacity, keys stay apart, and a weight above the capacity fails.
func counter(t *testing.T, h Harness) {
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		ctx := context.Background()
		c, err := core.NewCounter("logins", 10, w, h.Store)
		if err != nil {
			t.Fatal(err)
		}
		alice := key("alice")
		// step runs f, which must return want provided the events added from since on
		// still count, that is, f ran within w of since.
		step := func(what string, f func() (int, error), want int, since time.Duration) (span, bool) {
			t.Helper()
			var n int
			var err error
			at := tl.timed(func() { n, err = f() })
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !tl.inTime(t, what, span{since, since}, at, w) {
				return at, false
			}
			if n != want {
				t.Fatalf("%s at %v: got %d, want %d", what, at, n, want)
			}
			return at, true
		}
		add := func(weight int) func() (int, error) {
			return func() (int, error) { return c.Add(ctx, alice, weight) }
		}
		count := func() (int, error) { return c.Count(ctx, alice) }
		first, _ := step("add 2", add(2), 2, tl.now())
		tl.wait(w / 2)
		second, ok := step("add 3 half a window later", add(3), 5, first.from)
		if !ok {
			return false
		}
		if _, ok := step("count", count, 5, first.from); !ok {
			return false
		}
		// At least a window after the first 2 were added: they have left, the 3 still count.
		tl.wait(w/2 + tl.tol())
		for _, s := range []struct {
			what string
			f    func() (int, error)
			want int
		}{
			{"count once the first 2 have left", count, 3},
			{"add 9: saturates", add(9), 10},
			{"count when saturated", count, 10},
		} {
			if _, ok := step(s.what, s.f, s.want, second.from); !ok {
				return false
			}
		}
		if n, err := c.Count(ctx, key("bob")); err != nil || n != 0 {
			t.Fatalf("another key: got %d, %v; want 0", n, err)
		}
		if _, err := c.Add(ctx, alice, 11); !errors.Is(err, core.ErrCostTooHigh) {
			t.Fatalf("a weight above the capacity: %v, want ErrCostTooHigh", err)
		}
		return true
	})
}

// reset: a store that is a core.Resetter forgets a bucket's grants in every rate, exact and
// bounded, and only that bucket's; resetting a bucket never used is no error; resets racing
// with decisions on the bucket leave it whole (each decision sees it before or after).
func reset(t *testing.T, h Harness) {
	r, ok := h.Store.(core.Resetter)
	if !ok {
		t.Skipf("%T is not a core.Resetter", h.Store)
	}
	ctx := context.Background()
	for _, text := range []string{"2/1h", "2/1h,300/1d", "2/1h,200000/1d"} {
		p := mustParse(text)
		q := core.Query{Policy: p, Scope: "login", Key: "alice"}
		other := core.Query{Policy: p, Scope: "login", Key: "bob"}
		decide(t, h, q)
		decide(t, h, q)
		decide(t, h, other)
		if d := decide(t, h, q); d.Allowed {
			t.Fatalf("%s: third request admitted before the reset: %+v", text, d)
		}
		if err := r.Reset(ctx, q); err != nil {
			t.Fatalf("%s: Reset: %v", text, err)
		}
		pq := q
		pq.Mode = core.Peek
		// No grant left in any window: the exact rate, which reports, has 2 remaining, and
		// FullReset shows that the bounded rate holds none either.
		if d := decide(t, h, pq); !d.Allowed || d.Remaining != 2 || d.FullReset != 0 {
			t.Fatalf("%s: Peek after the reset: %+v, want admitted with 2 remaining and no grant in any window (FullReset 0)", text, d)
		}
		if d := decide(t, h, q); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s: first request after the reset: %+v, want admitted with 1 remaining", text, d)
		}
		if d := decide(t, h, other); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%s: another key after the reset: %+v, want its own second grant, 0 remaining", text, d)
		}
		if err := r.Reset(ctx, core.Query{Policy: p, Scope: "login", Key: "never-seen"}); err != nil {
			t.Fatalf("%s: Reset of a bucket never used: %v", text, err)
		}
	}
	// Resets racing with decisions: nothing fails, and the bucket stays a bucket: after
	// them, at most N more are admitted.
	p := mustParse("3/1h,400/1d")
	q := core.Query{Policy: p, Scope: "race", Key: "k"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				var err error
				if g == 0 && i%5 == 0 {
					err = r.Reset(ctx, q)
				} else {
					_, err = h.Store.Decide(ctx, q)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("during resets: %v", err)
	}
	if err := r.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 5 {
		if decide(t, h, q).Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Fatalf("after the racing resets and one more, %d of 5 admitted, want 3", admitted)
	}
}

// release: a store that is a core.Releaser gives back exactly the grant named, the one a
// decision recorded, even after later grants landed: the oldest grant given back, a
// refusal's wait runs from the second; in bounded rates its units leave its bucket; other
// keys keep theirs; a grant given back twice, or never made, changes nothing more.
func release(t *testing.T, h Harness) {
	rel, ok := h.Store.(core.Releaser)
	if !ok {
		t.Skipf("%T is not a core.Releaser", h.Store)
	}
	ctx := context.Background()
	retry(t, h, func(tl *timeline, w time.Duration, key func(string) string) bool {
		for _, extra := range []string{"", ",300/1d", ",2000/1d"} {
			p := mustParse(fmt.Sprintf("3/%v%s", w, extra))
			q := core.Query{Policy: p, Scope: "login", Key: key("alice" + extra)}
			var at [3]span
			var ds [3]core.Decision
			for i := range at {
				if i > 0 {
					tl.wait(w / 8)
				}
				ds[i], at[i] = tl.decide(t, q)
				if !ds[i].Allowed {
					t.Fatalf("%s: request %d refused: %+v", p, i+1, ds[i])
				}
			}
			if err := rel.Release(ctx, q, ds[0].Grant); err != nil {
				t.Fatalf("%s: Release: %v", p, err)
			}
			if err := rel.Release(ctx, q, ds[0].Grant); err != nil { // again: nothing left to give
				t.Fatalf("%s: Release again: %v", p, err)
			}
			if d, _ := tl.decide(t, q); !d.Allowed {
				t.Fatalf("%s: refused after the first grant was given back: %+v", p, d)
			}
			d, last := tl.decide(t, q)
			if !tl.inTime(t, "the grants", at[0], last, w) {
				return false
			}
			// The second grant is now the oldest: the wait runs from it, not from the
			// first (given back) nor from the newest.
			if lo, hi := tl.until(at[1], w, last); d.Allowed || d.RetryAfter < lo || d.RetryAfter > hi {
				t.Fatalf("%s: at %v got %+v, want refused until the second grant (at %v) is %v old: RetryAfter in [%v, %v]", p, last, d, at[1], w, lo, hi)
			}
		}
		return true
	})
	// Bounded rates, alone and several: a grant's units leave its bucket.
	for _, text := range []string{"300/1h", "300/1h,400/1d", "2/1h,300/1d"} {
		p := mustParse(text)
		q := core.Query{Policy: p, Scope: "bulk", Key: "k", Cost: 1}
		if p.Rates()[0].Count == 300 {
			q.Cost = 100
		}
		var first core.Decision
		for i := range 2 {
			d := decide(t, h, q)
			if !d.Allowed {
				t.Fatalf("%s: grant %d refused: %+v", text, i+1, d)
			}
			if i == 0 {
				first = d
			}
		}
		other := core.Query{Policy: p, Scope: "bulk", Key: "other", Cost: q.Cost}
		decide(t, h, other)
		if err := rel.Release(ctx, q, first.Grant); err != nil {
			t.Fatalf("%s: Release: %v", text, err)
		}
		pq := q
		pq.Mode = core.Peek
		want := p.Rates()[0].Count - q.Cost
		if d := decide(t, h, pq); !d.Allowed || d.Remaining != want {
			t.Fatalf("%s: after giving back one of two grants of %d: %+v, want %d remaining", text, q.Cost, d, want)
		}
		po := other
		po.Mode = core.Peek
		if d := decide(t, h, po); d.Remaining != want {
			t.Fatalf("%s: another key after the release: %+v, want its own %d remaining", text, d, want)
		}
		if err := rel.Release(ctx, core.Query{Policy: p, Scope: "bulk", Key: "never-seen", Cost: q.Cost}, first.Grant); err != nil {
			t.Fatalf("%s: Release on a bucket never used: %v", text, err)
		}
	}
}

// releaseConcurrent: decisions and releases racing on one key from many goroutines leave
// it exact: afterwards it counts exactly the grants that were not given back.
func releaseConcurrent(t *testing.T, h Harness) {
	rel, ok := h.Store.(core.Releaser)
	if !ok {
		t.Skipf("%T is not a core.Releaser", h.Store)
	}
	ctx := context.Background()
	for _, text := range []string{"30/1h", "30/1h,400/1d", "300/1h"} {
		p := mustParse(text)
		q := core.Query{Policy: p, Scope: "race", Key: "k"}
		var kept atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					d, err := h.Store.Decide(ctx, q)
					if err == nil && d.Allowed {
						if (g+i)%2 == 0 {
							err = rel.Release(ctx, q, d.Grant)
						} else {
							kept.Add(1)
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", text, err)
		}
		pq := q
		pq.Mode = core.Peek
		d := decide(t, h, pq)
		if want := p.Rates()[0].Count - int(kept.Load()); d.Remaining != want {
			t.Fatalf("%s: %d grants kept, %d remaining, want %d", text, kept.Load(), d.Remaining, want)
		}
	}
}

// The suite's own policies, valid by construction.
var (
	mustPolicy = policytest.Of
	mustParse  = policytest.Parse
)
