package core_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/reqlimit/reqlimit/core"
)

// TestOneRateFastPathsMatchTheGeneralPath holds the straight-line code for a policy of one
// rate (exact or bounded) to the loops every other policy takes: the same decision, every
// field, and the same state after it, through random arrivals, costs, modes and
// give-backs, on a clock that also stands still and jumps.
func TestOneRateFastPathsMatchTheGeneralPath(t *testing.T) {
	for _, text := range []string{"1/1s", "3/1m", "256/1s", "257/1s", "1000/100ms", "1000000/1s", "1000000000/1h", "5000/7ms"} {
		p := mustParse(text)
		for _, pattern := range patterns {
			t.Run(fmt.Sprintf("%s/%s", text, pattern), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(len(text)+len(pattern))))
				fast, loops := p.NewState(), p.NewState()
				var grants []int64
				period := p.Rates()[0].Period
				for i, at := range arrivals(rng, pattern, period, 3000) {
					if rng.IntN(50) == 0 {
						at += rng.Int64N(3 * int64(period)) // an idle key coming back
					}
					cost := 1 + rng.IntN(min(3, p.Rates()[0].Count))
					mode := []core.Mode{core.Enforce, core.Enforce, core.Enforce, core.Penalty, core.Peek}[rng.IntN(5)]
					got, err1 := p.Apply(fast, at, cost, mode)
					want, err2 := p.ApplyRates(loops, at, cost, mode)
					if err1 != nil || err2 != nil {
						t.Fatalf("request %d: errors %v, %v", i, err1, err2)
					}
					if got != want {
						t.Fatalf("request %d at %d cost %d mode %d:\nfast path %+v\nloops     %+v", i, at, cost, mode, got, want)
					}
					if !slices.Equal(fast, loops) {
						t.Fatalf("request %d: states differ after it:\nfast path %v\nloops     %v", i, fast, loops)
					}
					if got.Allowed && mode == core.Enforce {
						grants = append(grants, got.Grant)
					}
					if len(grants) > 0 && rng.IntN(20) == 0 {
						g := grants[rng.IntN(len(grants))]
						p.Release(fast, g, 1)
						p.Release(loops, g, 1)
					}
				}
			})
		}
	}
}

// TestBucketFromIsFloorDiv: the bounded form's bucket of a time, found from an earlier
// bucket without dividing where it can, is always the larger of that bucket and the
// quotient, across signs, bucket edges and a clock near the top of int64.
func TestBucketFromIsFloorDiv(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, g := range []int64{1, 2, 7, 10_000_000, 36_000_000_000, 1 << 40, 1 << 55} {
		for range 20000 {
			// Earlier time e (its bucket k), later or equal time t: as a key's state holds
			// them, more than a period above MinInt64.
			lo := math.MinInt64 + 101*g
			e := lo + rng.Int64N(math.MaxInt64)
			if rng.IntN(2) == 0 {
				e = rng.Int64N(1<<40) - 1<<39
			}
			t2 := e
			switch rng.IntN(4) {
			case 0:
				t2 = e + rng.Int64N(2*g) // near: often in the same bucket or the next
			case 1:
				t2 = e - rng.Int64N(2*g) // a bucket ahead of t (bLo moved past empty ones)
			case 2:
				t2 = (core.FloorDiv(e, g)+1)*g - 1 + rng.Int64N(3) // at the bucket's end
			default:
				t2 = e + rng.Int64N(math.MaxInt64-max(e, 0))
			}
			if t2 < lo {
				continue
			}
			k := core.FloorDiv(e, g)
			if got, want := core.BucketFrom(k, t2, g), max(core.FloorDiv(t2, g), k); got != want {
				t.Fatalf("BucketFrom(%d, %d, %d) = %d, want %d", k, t2, g, got, want)
			}
		}
	}
}
