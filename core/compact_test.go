package core_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// The policies of one exact rate a compact store keeps in its compact log.
var compactPolicies = []*core.Policy{
	mustPolicy(core.Rate{Count: 1, Period: time.Second}),
	mustPolicy(core.Rate{Count: 3, Period: time.Minute}),
	mustPolicy(core.Rate{Count: 7, Period: 100 * time.Millisecond}),
	mustPolicy(core.Rate{Count: 100, Period: time.Minute}),
	mustPolicy(core.Rate{Count: bounds.LargestExact, Period: time.Second}),
	mustPolicy(core.Rate{Count: 5, Period: 1234567 * time.Nanosecond}),
}

func compactStore() *core.MemoryStore {
	return core.NewMemoryStore(&core.MemoryConfig{Compact: true, SweepInterval: time.Hour})
}

// TestCompactMatchesExactOnWholeUnits: when every time is a whole number of units, the
// compact log rounds nothing, and must answer exactly as the exact engine does, field for
// field, through Enforce, Penalty and Peek, costs up to 3, and grants given back at random.
func TestCompactMatchesExactOnWholeUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	released := 0
	for _, p := range compactPolicies {
		u := int64(p.Unit())
		if int64(p.Rates()[0].Period)%u != 0 {
			continue // TestCompactIsStrictAndPrompt's
		}
		for _, pattern := range patterns {
			t.Run(fmt.Sprintf("%s/%s", p, pattern), func(t *testing.T) {
				store, state := compactStore(), p.NewState()
				q := core.Query{Policy: p, Key: "k"}
				type grant struct {
					exact, compact int64
					cost           int
				}
				var grants []grant
				for i, at := range arrivals(rng, pattern, p.Rates()[0].Period, 800) {
					at = at / u * u
					if len(grants) > 0 && rng.IntN(5) == 0 {
						j := rng.IntN(len(grants))
						g := grants[j]
						grants = slices.Delete(grants, j, j+1)
						p.Release(state, g.exact, g.cost)
						if err := store.ReleaseAt(core.Query{Policy: p, Key: "k", Cost: g.cost}, g.compact); err != nil {
							t.Fatal(err)
						}
						released++
					}
					q.Cost = 1 + rng.IntN(min(3, p.Rates()[0].Count))
					q.Mode = []core.Mode{core.Enforce, core.Enforce, core.Enforce, core.Penalty, core.Peek}[rng.IntN(5)]
					want, err := p.Apply(state, at, q.Cost, q.Mode)
					if err != nil {
						t.Fatal(err)
					}
					got, err := store.DecideAt(q, at)
					if err != nil {
						t.Fatal(err)
					}
					if want.Grant != 0 || got.Grant != 0 {
						if got.Grant*u != want.Grant {
							t.Fatalf("request %d at %d: grant at unit %d (×%d), the exact log's at %d", i, at, got.Grant, u, want.Grant)
						}
						if want.Allowed && q.Mode == core.Enforce {
							grants = append(grants, grant{want.Grant, got.Grant, q.Cost})
						}
					}
					got.Grant, want.Grant = 0, 0
					if got != want {
						t.Fatalf("request %d at %d (cost %d, mode %d):\n got %+v\nwant %+v", i, at, q.Cost, q.Mode, got, want)
					}
				}
			})
		}
	}
	if released == 0 {
		t.Fatal("nothing given back: the releases went untested")
	}
}

// TestCompactIsStrictAndPrompt: at any time, rounded or not, the compact log never admits
// what the exact oracle refuses, admits whatever the oracle admits with the window two units
// longer (the documented lateness), and a refusal's RetryAfter is exactly the first instant
// a request would fit.
func TestCompactIsStrictAndPrompt(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	refused := 0
	for _, p := range compactPolicies {
		u := int64(p.Unit())
		for _, pattern := range patterns {
			t.Run(fmt.Sprintf("%s/%s", p, pattern), func(t *testing.T) {
				store := compactStore()
				var o oracle
				var last int64
				for i, at := range arrivals(rng, pattern, p.Rates()[0].Period, 2000) {
					at = max(last, at+rng.Int64N(u)) // off the units, never back
					last = at
					cost := 1 + rng.IntN(min(3, p.Rates()[0].Count))
					q := core.Query{Policy: p, Key: "k", Cost: cost}
					d, err := store.DecideAt(q, at)
					if err != nil {
						t.Fatal(err)
					}
					o.judge(t, p, i, at, cost, d.Allowed, func(core.Rate) int64 { return 2 * u }, "two units")
					if d.Allowed {
						continue
					}
					refused++
					peek := q
					peek.Mode = core.Peek
					if d.RetryAfter <= 0 {
						t.Fatalf("request %d refused with RetryAfter %v", i, d.RetryAfter)
					}
					if e, _ := store.DecideAt(peek, at+int64(d.RetryAfter)-1); e.Allowed {
						t.Fatalf("request %d refused at %d with RetryAfter %v, but admitted 1ns earlier", i, at, d.RetryAfter)
					}
					if e, _ := store.DecideAt(peek, at+int64(d.RetryAfter)); !e.Allowed {
						t.Fatalf("request %d refused at %d with RetryAfter %v, but still refused then", i, at, d.RetryAfter)
					}
				}
				if worst := maxInAnyWindow(o.times, p.Rates()[0].Period); worst > p.Rates()[0].Count {
					t.Fatalf("%d granted in one %v interval, limit %d", worst, p.Rates()[0].Period, p.Rates()[0].Count)
				}
			})
		}
	}
	if refused == 0 {
		t.Fatal("nothing refused: the test tested little")
	}
}

// TestCompactUnits: the unit puts at most 2^15 in a period, is 1, 2 or 5 times a power of
// ten, and divides whole milliseconds and seconds for periods long enough to have them.
func TestCompactUnits(t *testing.T) {
	for _, c := range []struct {
		T    time.Duration
		unit time.Duration
	}{
		{time.Millisecond, 50 * time.Nanosecond},
		{100 * time.Millisecond, 5 * time.Microsecond},
		{time.Second, 50 * time.Microsecond},
		{time.Minute, 2 * time.Millisecond},
		{time.Hour, 200 * time.Millisecond},
		{24 * time.Hour, 5 * time.Second},
		{10 * time.Microsecond, time.Nanosecond},
	} {
		p := mustPolicy(core.Rate{Count: 3, Period: c.T})
		if got := p.Unit(); got != c.unit {
			t.Errorf("%v: unit %v, want %v", c.T, got, c.unit)
		}
		if n := (c.T + p.Unit() - 1) / p.Unit(); n > 1<<15 {
			t.Errorf("%v: %d units in a period", c.T, n)
		}
	}
}

// TestCompactHeapPerKey: 100,000 keys of 3/1m and of 100/1m in a compact store, the live
// heap after GC per key: at most 64 and 250 bytes (the exact log's were 84 and 932).
func TestCompactHeapPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("fills stores of 100,000 keys")
	}
	for _, c := range []struct {
		policy string
		most   float64
	}{
		{"3/1m", 64},
		{"100/1m", 250},
	} {
		p := mustParse(c.policy)
		got := heapPerKeyIn(p, 100_000, &core.MemoryConfig{Compact: true})
		t.Logf("%s: %.0f B/key compact", c.policy, got)
		if got > c.most {
			t.Errorf("%s: %.0f B/key, want at most %.0f", c.policy, got, c.most)
		}
	}
}

// TestCompactJudgesNoLaterThanNow: a decision right after a grant that was rounded up to the
// end of its unit must not be judged at that end. 2 per second: a grant on a whole unit, a
// second one half a unit before the first is a period old (recorded at the end of its unit,
// exactly a period after the first), then a request a little later, still within the
// first's period: three within one period would break the limit.
func TestCompactJudgesNoLaterThanNow(t *testing.T) {
	p := mustPolicy(core.Rate{Count: 2, Period: time.Second})
	u, T := int64(p.Unit()), int64(time.Second)
	s := compactStore()
	q := core.Query{Policy: p, Key: "k"}
	first := int64(1000) * T
	for i, c := range []struct {
		at    int64
		admit bool
	}{{first, true}, {first + T - u/2, true}, {first + T - u/3, false}, {first + T, true}} {
		if d, _ := s.DecideAt(q, c.at); d.Allowed != c.admit {
			t.Fatalf("request %d at first+%dns: %+v, want admitted %v", i+1, c.at-first, d, c.admit)
		}
	}
}
