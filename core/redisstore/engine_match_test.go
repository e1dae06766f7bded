package redisstore_test

import (
	"math"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// newEngine returns core's memory store on clock: it runs core's engine, which every
// script must match decision for decision. Its clock counts from 1970, as the scripts'
// does: a bounded rate's buckets are whole granules of that clock, so a store counting
// from when it was made would place its bucket edges elsewhere. (The memory store counts
// from its clock's first reading, which it takes when it is made: that reading is 1970.)
// It never sweeps: a sweep drops keys that no window holds any more, which a script never
// does, and then records no earlier than the sweep, which a clock stepping back would show.
func newEngine(clock *storetest.ManualClock) *core.MemoryStore {
	first := true
	now := func() time.Time {
		if first {
			first = false
			return time.Unix(0, 0)
		}
		return clock.Now()
	}
	return core.NewMemoryStore(&core.MemoryConfig{Now: now, SweepInterval: math.MaxInt64})
}
