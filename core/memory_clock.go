package core

import (
	"sync/atomic"
	"time"
)

// inBubble reports whether now, a time.Now reading, was taken inside a testing/synctest
// bubble: there it has no monotonic reading, since the bubble's time is its own and moves
// only as the bubble sleeps.
func inBubble(now time.Time) bool { return now == now.Round(0) }

// bubbleClock is the clock of a store made in a synctest bubble at epoch: the bubble's
// time inside a bubble. Outside one (the bubble ended and a test goes on with the store,
// or the store is the process's default) the bubble's made-up date means nothing, so the
// clock goes on from its last reading in the bubble by the monotonic time since its first
// reading outside: it never leaps ahead, which would let every grant out of its window.
func bubbleClock(epoch time.Time) func() int64 {
	var last atomic.Int64                 // the latest reading in the bubble
	var outside atomic.Pointer[time.Time] // the first reading outside it
	return func() int64 {
		now := time.Now()
		if inBubble(now) {
			n := int64(now.Sub(epoch))
			last.Store(n)
			return n
		}
		if outside.Load() == nil {
			first := now // allocated once, not at every reading
			outside.CompareAndSwap(nil, &first)
		}
		return last.Load() + int64(time.Since(*outside.Load()))
	}
}

// now returns nanoseconds on the store's clock: since the store was made, unless
// MemoryConfig.Now or a bubble says otherwise.
func (m *MemoryStore) now() int64 {
	if m.clock != nil {
		return m.clock()
	}
	return int64(time.Since(m.start))
}
