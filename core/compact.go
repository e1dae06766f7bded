package core

import (
	"math/bits"
	"time"
	"unsafe"

	"github.com/reqlimit/reqlimit/internal/bounds"
)

// The memory store keeps a policy of one exact rate N per T, the common case, in a compact
// log: grant times in units of u nanoseconds, each a uint16 offset from a base the key
// keeps, so a grant costs 2 bytes rather than 8. u is bounds.Unit(T): whole seconds and
// milliseconds stay whole, so times a clock gives in round figures are not rounded at all.
// The Redis store under WithCompact keeps such a policy of a period above 16.384 ms (whose
// unit is whole microseconds) in the same units, and rounds alike.
//
// Rounding keeps the limit strict: a grant is recorded at its time rounded up to a unit (no
// earlier than it happened), a decision judges its time rounded down (no later than it is),
// and T counts as whole units rounded up. So a grant recorded at unit g leaves the window
// once floor(now/u) >= g + Tu, when g*u + T <= now: never sooner than the exact log says.
// The price is lateness: a slot is granted again up to 2u after the exact log would, u being
// at most 2.5 T / bounds.CompactSpan.
//
// State layout, in the int64 slots the store gives a key (compactLen of them):
//
//	[0]     base: the unit offset 1 stands for (offset 0 is never)
//	[1:]    N uint16 offsets, oldest first: the newest grant is the last
//
// A recorded grant shifts the log left by its cost rather than writing into a ring: that
// keeps the write index out of the state, and for N=100 the key's whole entry in one
// 224-byte allocation.

// compactLen returns the int64 slots a compact log of n grants takes.
func compactLen(n int) int { return 1 + (n+3)/4 }

// A unitClock turns nanoseconds into units, by multiplication: a division per decision
// would cost a fair share of one.
type unitClock struct {
	u     int64  // nanoseconds a unit
	magic uint64 // floor(2^64 / u), for u > 1
	span  int64  // the rate's period in units, rounded up
}

func newUnitClock(T time.Duration) unitClock {
	u := bounds.Unit(int64(T))
	c := unitClock{u: u, span: (int64(T) + u - 1) / u}
	if u > 1 {
		c.magic = ^uint64(0) / uint64(u) // floor((2^64-1)/u): a product falls at most one short, which floor corrects
	}
	return c
}

// floor returns floor(ns/u).
func (c *unitClock) floor(ns int64) int64 {
	if c.u == 1 {
		return ns
	}
	if ns < 0 {
		return floorDiv(ns, c.u)
	}
	q, _ := bits.Mul64(uint64(ns), c.magic) // q is floor(ns/u) or one less
	// Unsigned: within u of MaxInt64 the product exceeds it.
	if (q+1)*uint64(c.u) <= uint64(ns) {
		q++
	}
	return int64(q)
}

// ceil returns ceil(ns/u), given fl = floor(ns/u).
func (c *unitClock) ceil(ns, fl int64) int64 {
	if fl*c.u < ns {
		return fl + 1
	}
	return fl
}

// compactLog views the state s as its base and its offsets.
func compactLog(s []int64, n int) (base *int64, log []uint16) {
	return &s[0], unsafe.Slice((*uint16)(unsafe.Pointer(&s[1])), n)
}

// applyCompact is applySingle on a compact log, at now in nanoseconds.
func (p *Policy) applyCompact(d *Decision, s []int64, now int64, cost int, mode Mode) error {
	if cost < 1 {
		cost = 1
	}
	N := p.rates[0].Count
	if cost > N {
		return p.checkCost(cost)
	}
	c := &p.units
	base, log := compactLog(s, N)
	B := *base
	// Judged no later than it is: not before the unit ending at the newest grant, which
	// was rounded up to the end of the unit it happened in, so this decision, which runs
	// after it, happens no earlier than that unit's start.
	fl := c.floor(now)
	at := fl
	newest := int64(log[N-1])
	if newest != 0 && at < B+newest-2 {
		at = B + newest - 2
	}
	k := N - cost + 1
	g := int64(log[N-k]) // the k-th most recent grant's offset, 0 if none
	allowed := g == 0 || B+g-1 <= at-c.span
	if mode == Penalty || (allowed && mode == Enforce) {
		// Recorded no earlier than it happened, and never before the newest grant.
		rec := max(c.ceil(now, fl), at, B+newest-1)
		if newest == 0 { // no grant held: the base is free to move
			B = rec - c.span
			*base = B
		} else if rec-B+1 > 0xffff {
			B = rebase(log, B, rec-c.span)
			*base = B
		}
		copy(log, log[cost:])
		v := uint16(rec - B + 1)
		for i := N - cost; i < N; i++ {
			log[i] = v
		}
		d.Grant = rec
	}
	p.reportCompact(d, log, B, now, at, k, allowed)
	return nil
}

// rebase moves the log's base forward to nb, dropping the grants before it (every one is
// out of any window a later decision looks at), and returns nb.
func rebase(log []uint16, B, nb int64) int64 {
	for i, v := range log {
		if v == 0 {
			continue
		}
		if g := B + int64(v) - 1; g < nb {
			log[i] = 0
		} else {
			log[i] = uint16(g - nb + 1)
		}
	}
	return nb
}

// reportCompact fills d as applySingle's report does, from the log after recording: times
// run from now (nanoseconds), decisions from at (units).
func (p *Policy) reportCompact(d *Decision, log []uint16, B, now, at int64, k int, allowed bool) {
	c := &p.units
	N := len(log)
	// The offsets above cut still count: the window is the units after at - span.
	used := countAbove(log, at-c.span-B+1)
	leave := func(v uint16) time.Duration { // when the grant of offset v leaves the window
		return time.Duration(max(0, (B+int64(v)-1+c.span)*c.u-now))
	}
	d.Allowed, d.Rate, d.Remaining = allowed, p.rates[0], N-used
	if used > 0 {
		d.Reset = leave(log[N-used])
		d.FullReset = leave(log[N-1])
	}
	if g := log[N-k]; !allowed && g != 0 {
		d.RetryAfter = leave(g)
	}
}

// countAbove returns how many offsets of the log, which ascend, are above cut (and so not
// 0). Like usedInLog it gallops from the newest, then bisects: a client well under its
// limit costs a step or two.
func countAbove(log []uint16, cut int64) int {
	n := len(log)
	cut = max(cut, 0)
	above := func(k int) bool { return int64(log[n-k]) > cut } // the k-th most recent
	if above(n) {
		return n
	}
	lo, hi := 0, 1 // entry lo is above cut (lo 0: none checked), entry hi is not
	for hi < n && above(hi) {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, n)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if above(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// releaseCompact is release on a compact log: grant is the unit Decision.Grant named.
func (p *Policy) releaseCompact(s []int64, grant int64, cost int) {
	N := p.rates[0].Count
	base, log := compactLog(s, N)
	v := grant - *base + 1
	if v < 1 || v > 0xffff {
		return // before the base: dropped, out of every window
	}
	i := N - 1 // the newest entry not after the grant
	for i >= 0 && int64(log[i]) > v {
		i--
	}
	r := 0 // its entries: i, i-1, ... while they equal v
	for r < max(cost, 1) && i-r >= 0 && int64(log[i-r]) == v {
		r++
	}
	if r == 0 {
		return
	}
	lo := i - r + 1
	copy(log[r:i+1], log[:lo])
	clear(log[:r])
}

// idleCompact is idle on a compact log.
func (p *Policy) idleCompact(s []int64, now int64) bool {
	N := p.rates[0].Count
	base, log := compactLog(s, N)
	v := log[N-1]
	// In units, not nanoseconds: within a period of MaxInt64 the product would wrap.
	return v == 0 || *base+int64(v)-1+p.units.span <= p.units.floor(now)
}
