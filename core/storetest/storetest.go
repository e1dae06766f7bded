// Package storetest is the conformance suite every core.Store must pass: the same
// scenarios run against the in-memory store, Redis standalone and Redis Cluster, so the
// stores cannot drift apart.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// A Harness is a store under test and a way to let time pass for it.
type Harness struct {
	Store core.Store
	// Advance lets d pass on the store's clock. Nil means the store keeps real time, and
	// the suite sleeps instead (with windows short enough to keep that quick).
	Advance func(d time.Duration)
}

func (h Harness) wait(d time.Duration) {
	if h.Advance != nil {
		h.Advance(d)
		return
	}
	time.Sleep(d)
}

// slack is how far real-time answers may drift from the ideal: a round trip and a sleep's
// oversleep. Virtual clocks get none.
func (h Harness) slack() time.Duration {
	if h.Advance != nil {
		return 0
	}
	return 40 * time.Millisecond
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
}

const window = 400 * time.Millisecond

func decide(t *testing.T, h Harness, q core.Query) core.Decision {
	t.Helper()
	d, err := h.Store.Decide(context.Background(), q)
	if err != nil {
		t.Fatalf("Decide(%s %q %q cost %d): %v", q.Policy, q.Scope, q.Key, q.Cost, err)
	}
	return d
}

func admitsCountThenRefuses(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(3, window))
	q := core.Query{Policy: p, Scope: "GET /user/test", Key: "192.0.2.1"}
	for i := range 3 {
		d := decide(t, h, q)
		if !d.Allowed || d.Remaining != 2-i || d.Limit != 3 || d.Window != window || d.RetryAfter != 0 {
			t.Fatalf("request %d: got %+v, want admitted with %d remaining of 3 per %v", i+1, d, 2-i, window)
		}
		if d.Reset < window-h.slack() || d.Reset > window {
			t.Fatalf("request %d: Reset %v, want about %v", i+1, d.Reset, window)
		}
	}
	d := decide(t, h, q)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > window {
		t.Fatalf("request 4: got %+v, want refused with 0 < RetryAfter <= %v", d, window)
	}
}

func retryAfterFromGrants(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(2, window))
	q := core.Query{Policy: p, Key: "k"}
	decide(t, h, q)
	h.wait(window / 2)
	decide(t, h, q)
	d := decide(t, h, q)
	// The first grant leaves the window half a window from now, not a whole one.
	if d.Allowed || d.RetryAfter > window/2 || d.RetryAfter < window/2-h.slack()-window/8 {
		t.Fatalf("got %+v, want refused with RetryAfter about %v", d, window/2)
	}
	if d.Reset > window || d.Reset < window-h.slack()-window/8 {
		t.Fatalf("Reset %v, want about %v (the newest grant's expiry)", d.Reset, window)
	}
	h.wait(d.RetryAfter + h.slack()/4)
	if d := decide(t, h, q); !d.Allowed {
		t.Fatalf("after RetryAfter: got %+v, want admitted", d)
	}
	if d := decide(t, h, q); d.Allowed {
		t.Fatalf("the slot freed by time went to one request, yet a second was admitted: %+v", d)
	}
}

func isolation(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(1, time.Hour))
	other := core.MustPolicy(core.Per(2, time.Hour))
	base := core.Query{Policy: p, Scope: "/a", Key: "10.0.0.1"}
	variants := []core.Query{
		base,
		{Policy: p, Scope: "/b", Key: "10.0.0.1"},
		{Policy: p, Scope: "/a", Key: "10.0.0.2"},
		{Policy: other, Scope: "/a", Key: "10.0.0.1"},
		{Policy: p, Scope: "/a10.0.0.1", Key: ""},
		{Policy: p, Scope: "", Key: "/a10.0.0.1"},
	}
	for i, q := range variants {
		if d := decide(t, h, q); !d.Allowed {
			t.Fatalf("variant %d (%s %q %q): first request refused, so it shares a bucket: %+v", i, q.Policy, q.Scope, q.Key, d)
		}
	}
	if d := decide(t, h, core.Query{Policy: core.MustParsePolicy("1/1h"), Scope: "/a", Key: "10.0.0.1"}); d.Allowed {
		t.Fatalf("an equal policy parsed anew must share the bucket, got %+v", d)
	}
}

func awkwardKeys(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(1, time.Hour))
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
	p := core.MustPolicy(core.Per(2, window/4), core.Per(3, window))
	q := core.Query{Policy: p, Key: "k"}
	for i := range 2 {
		if d := decide(t, h, q); !d.Allowed {
			t.Fatalf("request %d refused: %+v", i+1, d)
		}
	}
	d := decide(t, h, q)
	if d.Allowed || d.Rate != 0 || d.Limit != 2 {
		t.Fatalf("third request at once: got %+v, want refused by the 2-per-%v rate", d, window/4)
	}
	h.wait(window/4 + h.slack())
	d = decide(t, h, q)
	if !d.Allowed || d.Rate != 1 || d.Remaining != 0 {
		t.Fatalf("after the short window: got %+v, want admitted with the long rate (index 1) exhausted", d)
	}
	h.wait(window/4 + h.slack())
	d = decide(t, h, q)
	if d.Allowed || d.Rate != 1 || d.RetryAfter <= 0 {
		t.Fatalf("short rate has room but long is full: got %+v, want refused by rate 1", d)
	}
	// A refusal by one rate records nothing in the other.
	h.wait(d.RetryAfter + h.slack())
	if d := decide(t, h, q); !d.Allowed {
		t.Fatalf("after RetryAfter: got %+v, want admitted", d)
	}
}

func cost(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(3, time.Hour))
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
}

func penalty(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(2, window))
	enforce := core.Query{Policy: p, Key: "calm"}
	punish := core.Query{Policy: p, Key: "hammer", Mode: core.Penalty}
	for _, q := range []core.Query{enforce, punish} {
		decide(t, h, q)
		decide(t, h, q)
	}
	h.wait(window / 2)
	// Two refusals each: penalty mode records both, filling the window again.
	for _, q := range []core.Query{enforce, punish} {
		for range 2 {
			if d := decide(t, h, q); d.Allowed {
				t.Fatalf("%s: admitted a third request", q.Key)
			}
		}
	}
	h.wait(window/2 + h.slack())
	if d := decide(t, h, enforce); !d.Allowed {
		t.Fatalf("enforce: refusals must not be recorded, got %+v", d)
	}
	if d := decide(t, h, punish); d.Allowed {
		t.Fatalf("penalty: the refusal half a window ago must still count, got %+v", d)
	}
}

func peek(t *testing.T, h Harness) {
	p := core.MustPolicy(core.Per(2, time.Hour))
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
}

// concurrentStrict hammers one key from many goroutines and checks, from the callers'
// side, that no interval of length T held more than N grants whose whole call fell inside.
func concurrentStrict(t *testing.T, h Harness) {
	const n, workers = 20, 8
	per := 100 * time.Millisecond
	if h.Advance != nil {
		t.Skip("needs real time")
	}
	p := core.MustPolicy(core.Per(n, per))
	q := core.Query{Policy: p, Key: "hot"}
	var mu sync.Mutex
	var grants []Call
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * per)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000_000 && time.Now().Before(deadline); i++ {
				start := time.Now()
				d, err := h.Store.Decide(context.Background(), q)
				end := time.Now()
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					grants = append(grants, Call{start, end})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if worst := MaxInWindow(grants, per); worst > n {
		t.Fatalf("%d grants fell inside one %v interval, limit %d", worst, per, n)
	}
	if len(grants) < 4*n {
		t.Fatalf("only %d grants in %v, want at least %d: slots freed by time were not re-granted", len(grants), 5*per, 4*n)
	}
}

// A Call is the span of one admitted call, as its caller saw it.
type Call struct{ Start, End time.Time }

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

// String makes a Call print readably in failures.
func (c Call) String() string {
	return fmt.Sprintf("[%v, %v]", c.Start.Format(time.StampMicro), c.End.Format(time.StampMicro))
}

// counter runs a core.Counter on the store: events slide out of the window, counts
// saturate at the capacity, keys stay apart, and a weight above the capacity fails.
func counter(t *testing.T, h Harness) {
	ctx := context.Background()
	c, err := core.NewCounter("logins", 10, window, h.Store)
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, got int, err error, want int) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: got %d, %v; want %d", what, got, err, want)
		}
	}
	n, err := c.Add(ctx, "alice", 2)
	step("add 2", n, err, 2)
	h.wait(window / 2)
	n, err = c.Add(ctx, "alice", 3)
	step("add 3 half a window later", n, err, 5)
	n, err = c.Count(ctx, "alice")
	step("count", n, err, 5)
	h.wait(window/2 + h.slack())
	n, err = c.Count(ctx, "alice")
	step("count once the first 2 have left", n, err, 3)
	n, err = c.Add(ctx, "alice", 9)
	step("add 9: saturates", n, err, 10)
	n, err = c.Count(ctx, "alice")
	step("count when saturated", n, err, 10)
	n, err = c.Count(ctx, "bob")
	step("another key", n, err, 0)
	if _, err := c.Add(ctx, "alice", 11); !errors.Is(err, core.ErrCostTooHigh) {
		t.Fatalf("a weight above the capacity: %v, want ErrCostTooHigh", err)
	}
}
