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

// oracle remembers every recorded unit and answers by brute force: how many units fall in
// (t-T, t]. It shares no code with the engine.
type oracle struct{ times []int64 }

func (o *oracle) inWindow(t int64, T time.Duration) int {
	n := 0
	for _, g := range o.times {
		if g > t-int64(T) && g <= t {
			n++
		}
	}
	return n
}

func (o *oracle) admits(p *core.Policy, t int64, cost int, slack func(core.Rate) int64) bool {
	for _, r := range p.Rates() {
		if o.inWindow(t, r.Period+time.Duration(slack(r)))+cost > r.Count {
			return false
		}
	}
	return true
}

func (o *oracle) record(t int64, cost int) {
	for range cost {
		o.times = append(o.times, t)
	}
}

// judge fails t if the answer for request i, of cost at at, admits what the exact log
// refuses (never allowed), or refuses what the exact log admits with each rate's window
// longer by slack (the documented lateness, late in words); an admission is recorded.
func (o *oracle) judge(t *testing.T, p *core.Policy, i int, at int64, cost int, allowed bool, slack func(core.Rate) int64, late string) {
	t.Helper()
	if allowed && !o.admits(p, at, cost, func(core.Rate) int64 { return 0 }) {
		t.Fatalf("request %d at %d: admitted beyond the limit", i, at)
	}
	if !allowed && o.admits(p, at, cost, slack) {
		t.Fatalf("request %d at %d: refused although it fits with each window %s longer", i, at, late)
	}
	if allowed {
		o.record(at, cost)
	}
}

// maxInAnyWindow returns the most units in any half-open interval of length T, by brute
// force over interval starts at each unit.
func maxInAnyWindow(times []int64, T time.Duration) int {
	s := slices.Sorted(slices.Values(times))
	best := 0
	for i := range s {
		n := 0
		for j := i; j < len(s) && s[j] < s[i]+int64(T); j++ {
			n++
		}
		best = max(best, n)
	}
	return best
}

// arrivals generates request times in one of several patterns, all within a few windows.
func arrivals(rng *rand.Rand, pattern string, T time.Duration, n int) []int64 {
	var out []int64
	var t int64 = 1_000_000_000 // start away from zero
	for len(out) < n {
		switch pattern {
		case "steady":
			t += int64(T) / int64(5+rng.IntN(20))
		case "bursts":
			if rng.IntN(8) == 0 {
				t += int64(T) / 2 * int64(1+rng.IntN(4)) // an idle gap
			} else {
				t += rng.Int64N(int64(T) / 50)
			}
		case "flood":
			if rng.IntN(3) == 0 {
				t += rng.Int64N(int64(T) / 20)
			}
		default: // mixed: any gap, from zero to two windows
			switch rng.IntN(4) {
			case 0:
			case 1:
				t += rng.Int64N(int64(T) / 10)
			case 2:
				t += rng.Int64N(int64(T))
			default:
				t += rng.Int64N(2 * int64(T))
			}
		}
		out = append(out, t)
	}
	return out
}

var patterns = []string{"steady", "bursts", "flood", "mixed"}

// TestExactMatchesOracle drives exact policies with random arrivals, costs and modes, and
// checks every answer against the oracle: the same admissions, Remaining, Reset, and a
// RetryAfter that is exactly the first instant a request would fit (probed with Peek).
func TestExactMatchesOracle(t *testing.T) {
	policies := []*core.Policy{
		mustPolicy(core.Rate{Count: 1, Period: time.Second}),
		mustPolicy(core.Rate{Count: 3, Period: time.Minute}),
		mustPolicy(core.Rate{Count: 7, Period: 100 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 5, Period: 200 * time.Millisecond}, core.Rate{Count: 12, Period: time.Second}),
		mustPolicy(core.Rate{Count: 10, Period: time.Second}, core.Rate{Count: 4, Period: 300 * time.Millisecond}, core.Rate{Count: 30, Period: 5 * time.Second}),
		mustPolicy(core.Rate{Count: bounds.LargestExact, Period: time.Second}),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range policies {
		for _, pattern := range patterns {
			for _, mode := range []core.Mode{core.Enforce, core.Penalty} {
				maxCost := 1
				if pattern == "mixed" {
					maxCost = min(3, p.Rates()[0].Count)
					for _, r := range p.Rates() {
						maxCost = min(maxCost, r.Count)
					}
				}
				name := fmt.Sprintf("%s/%s/mode%d", p, pattern, mode)
				t.Run(name, func(t *testing.T) {
					checkAgainstOracle(t, rng, p, pattern, mode, maxCost)
				})
			}
		}
	}
}

func checkAgainstOracle(t *testing.T, rng *rand.Rand, p *core.Policy, pattern string, mode core.Mode, maxCost int) {
	shortest := p.Rates()[0].Period
	for _, r := range p.Rates() {
		shortest = min(shortest, r.Period)
	}
	state := p.NewState()
	var o oracle
	var granted []int64
	admitted := 0
	for i, at := range arrivals(rng, pattern, shortest, 600) {
		cost := 1 + rng.IntN(maxCost)
		want := o.admits(p, at, cost, func(core.Rate) int64 { return 0 })
		d, err := p.Apply(state, at, cost, mode)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("request %d at %d cost %d: engine Allowed=%v, oracle %v", i, at, cost, d.Allowed, want)
		}
		if d.Allowed || mode == core.Penalty {
			o.record(at, cost)
		}
		if d.Allowed {
			admitted++
			for range cost {
				granted = append(granted, at)
			}
		}
		r := d.Rate
		if rem := r.Count - min(r.Count, o.inWindow(at, r.Period)); d.Remaining != rem {
			t.Fatalf("request %d: Remaining %d, oracle %d for %v", i, d.Remaining, rem, r)
		}
		if !d.Allowed {
			checkRetryAfter(t, p, state, at, cost, d.RetryAfter)
		}
	}
	for _, r := range p.Rates() {
		if worst := maxInAnyWindow(granted, r.Period); worst > r.Count {
			t.Fatalf("%d granted in one %v interval, limit %d", worst, r.Period, r.Count)
		}
	}
	if admitted == 0 {
		t.Fatal("nothing admitted")
	}
}

// checkRetryAfter probes a copy of the state: a request of the same cost must be refused
// 1ns before RetryAfter has passed and admitted at RetryAfter (refusals record nothing
// under Peek, so the probes do not disturb each other).
func checkRetryAfter(t *testing.T, p *core.Policy, state []int64, at int64, cost int, retry time.Duration) {
	t.Helper()
	if retry <= 0 {
		t.Fatalf("refused at %d with RetryAfter %v", at, retry)
	}
	probe := slices.Clone(state)
	if d, _ := p.Apply(probe, at+int64(retry)-1, cost, core.Peek); d.Allowed {
		t.Fatalf("refused at %d with RetryAfter %v, but admitted 1ns earlier", at, retry)
	}
	if d, _ := p.Apply(probe, at+int64(retry), cost, core.Peek); !d.Allowed {
		t.Fatalf("refused at %d with RetryAfter %v, but still refused then: %+v", at, retry, d)
	}
}

// TestBoundedIsStrictAndPrompt drives bounded (large-count) rates: the engine never admits
// what the exact oracle refuses (strict), and always admits what an exact oracle with the
// window stretched by one granule (Period/bounds.Buckets, the documented delay) admits.
func TestBoundedIsStrictAndPrompt(t *testing.T) {
	policies := []*core.Policy{
		mustPolicy(core.Rate{Count: bounds.LargestExact + 1, Period: time.Second}),
		mustPolicy(core.Rate{Count: 1000, Period: 100 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 400, Period: 100 * time.Millisecond}, core.Rate{Count: 2000, Period: time.Second}),
		mustPolicy(core.Rate{Count: 5, Period: 50 * time.Millisecond}, core.Rate{Count: 500, Period: time.Second}),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range policies {
		for _, pattern := range patterns {
			t.Run(fmt.Sprintf("%s/%s", p, pattern), func(t *testing.T) {
				state := p.NewState()
				var o oracle
				shortest := p.Rates()[0].Period
				gran := func(r core.Rate) int64 {
					if r.Count <= bounds.LargestExact {
						return 0
					}
					return (int64(r.Period) + bounds.Buckets - 1) / bounds.Buckets
				}
				for i, at := range arrivals(rng, pattern, shortest, 4000) {
					cost := 1 + rng.IntN(3)
					d, err := p.Apply(state, at, cost, core.Enforce)
					if err != nil {
						t.Fatal(err)
					}
					o.judge(t, p, i, at, cost, d.Allowed, gran, "one granule")
					if !d.Allowed {
						checkRetryAfter(t, p, state, at, cost, d.RetryAfter)
					}
				}
				for _, r := range p.Rates() {
					if worst := maxInAnyWindow(o.times, r.Period); worst > r.Count {
						t.Fatalf("%d granted in one %v interval, limit %d", worst, r.Period, r.Count)
					}
				}
			})
		}
	}
}

// TestBoundedMemoryDoesNotGrow checks the bounded form's point: state size is fixed
// whatever the count.
func TestBoundedMemoryDoesNotGrow(t *testing.T) {
	small := mustPolicy(core.Rate{Count: bounds.LargestExact + 1, Period: time.Second})
	huge := mustPolicy(core.Rate{Count: 10_000_000, Period: time.Second})
	if small.StateLen() != huge.StateLen() {
		t.Fatalf("state of %v is %d slots, of %v %d", small, small.StateLen(), huge, huge.StateLen())
	}
	if bytes := huge.StateLen() * 8; bytes > 1024 {
		t.Fatalf("10,000,000/s takes %d bytes per key", bytes)
	}
}

func TestCostAboveLimitIsAnError(t *testing.T) {
	p := mustPolicy(core.Rate{Count: 5, Period: time.Second}, core.Rate{Count: 2, Period: time.Second})
	_, err := p.Apply(p.NewState(), 0, 3, core.Enforce)
	if err == nil || err.Error() != "cost 3, rate 2/1s: reqlimit: cost exceeds the limit" {
		t.Fatalf("err %v", err)
	}
}
