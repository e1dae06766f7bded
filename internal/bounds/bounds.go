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
