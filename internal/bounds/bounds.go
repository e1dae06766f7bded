// Package bounds holds the limits of a rate that core enforces and that the stores, the
// adapters' tests and the docs' tools built on its engine must agree with. They are
// defined here once; core's documentation states them in prose.
package bounds

import (
	"math"
	"time"
)

// LargestExact is the largest count kept as an exact log of grant times. Larger rates are
// counted in Buckets sub-windows, re-granting a freed slot up to Period/Buckets late.
const LargestExact = 256

// Buckets is the number of sub-windows a rate above LargestExact splits its period into.
const Buckets = 100

// LargestCount is the largest count, and so the largest cost, a rate may have: every sum
// of counts stays exact (in Redis's Lua too) and within a Structured Field integer.
const LargestCount = 10_000_000_000_000

// LargestInt is the largest count an int holds: LargestCount, except on 32-bit platforms.
// Tests that need the largest count as an int use it, so that they build everywhere.
const LargestInt = min(LargestCount, math.MaxInt)

// ShortestPeriod is the shortest period a limit accepts without core.WithShortPeriods: a
// shorter one is nearly always a missing unit (Limit(3, 60) is 3 per 60 nanoseconds).
const ShortestPeriod = time.Millisecond

// CompactSpan is the most units a compact log puts in one period: grant times are 16-bit
// offsets from a base, and twice the period must fit before the base has to move.
const CompactSpan = 1 << 15

// Unit returns the unit, in nanoseconds, that a compact log keeps grant times in for a
// period: the smallest of 1, 2 and 5 times a power of ten nanoseconds that puts at most
// CompactSpan units in the period. Whole seconds and milliseconds stay whole, so times a
// clock gives in round figures are not rounded. Above 16.384 ms it is a whole number of
// microseconds, which the Redis store needs (its clock counts microseconds).
func Unit(period int64) int64 {
	least := (period + CompactSpan - 1) / CompactSpan
	for u := int64(1); ; u *= 10 {
		for _, m := range [...]int64{1, 2, 5} {
			if m*u >= least {
				return m * u
			}
		}
	}
}
