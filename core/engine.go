package core

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/reqlimit/reqlimit/internal/bounds"
)

// The engine works on a key's state: a []int64 of p.stateLen slots, laid out as
//
//	[0]                  write index of the grant log (the slot the next grant overwrites)
//	[1 : 1+logLen]       ring of the last logLen grant times (never = empty)
//	then per bounded rate boundedLen slots: lo, sum, newest, last, counts[bounds.Buckets+1]
//
// Every exact rate (Count up to bounds.LargestExact) reads the one log: a request of cost
// c fits rate N per T if the (N-c+1)-th most recent grant is at least T old. A bounded rate
// counts its grants in buckets of Period/bounds.Buckets (see expire). Times are int64
// nanoseconds on the store's clock. The Redis scripts keep the same layout.
const (
	never      = math.MinInt64
	boundedLen = 4 + bounds.Buckets + 1
)

// Slots of a bounded rate's block.
const (
	bLo     = 0 // lowest bucket index still counted: the oldest that holds a grant, if any does
	bSum    = 1 // sum of counts
	bNewest = 2 // bucket index of the newest grant
	bLast   = 3 // the latest decision time seen, so time never runs backwards for the key
	bCounts = 4
)

// resetState clears s, of length stateLen, to hold no grant.
func (p *Policy) resetState(s []int64) {
	clear(s)
	for i := 1; i <= p.logLen; i++ {
		s[i] = never
	}
}

// apply decides a request of the given cost for a key whose state is s at time now,
// records it as mode says, and writes the decision into *d, which the caller has zeroed.
// It takes no lock and reads no clock: the caller serializes calls on one state. A time
// earlier than one already recorded counts as that time, so racing clock reads cannot
// unsort the log. A cost below 1 counts as 1; above some rate's Count, ErrCostTooHigh.
func (p *Policy) apply(d *Decision, s []int64, now int64, cost int, mode Mode) error {
	cost = max(cost, 1)
	if cost > p.minCount {
		return p.checkCost(cost)
	}
	now = p.keyClock(s, now)
	allowed := true
	for i, r := range p.rates {
		if r.exact() {
			allowed = allowed && p.nth(s, r.Count-cost+1) <= now-int64(r.Period)
		} else {
			b := p.block(s, i)
			expire(b, r, p.gran[i], now)
			b[bLast] = now
			allowed = allowed && b[bSum]+int64(cost) <= int64(r.Count)
		}
	}
	if mode == Penalty || allowed && mode == Enforce {
		// cost entries in the log (at most its length, as far as any rate looks back) and
		// cost units in now's bucket of each bounded rate
		if L := p.logLen; L > 0 {
			w := int(s[0])
			for range min(cost, L) {
				s[1+w] = now
				if w++; w == L {
					w = 0
				}
			}
			s[0] = int64(w)
		}
		for _, i := range p.bounded {
			recordBounded(p.block(s, i), p.gran[i], now, cost, p.rates[i].Count)
		}
		d.Grant = now
	}
	p.report(d, s, now, cost, allowed)
	return nil
}

// checkCost refuses a cost above the narrowest rate's count.
func (p *Policy) checkCost(cost int) error {
	if cost <= p.minCount {
		return nil
	}
	return fmt.Errorf("cost %d, rate %v: %w", cost, p.narrowest(), ErrCostTooHigh)
}

// narrowest returns the first of p's rates of the smallest count: the one a cost above the
// limit exceeds most, and the one a smaller request must fit.
func (p *Policy) narrowest() Rate {
	return p.rates[slices.IndexFunc(p.rates, func(r Rate) bool { return r.Count == p.minCount })]
}

// nth returns the k-th most recent grant time in the log (1 <= k <= logLen).
func (p *Policy) nth(s []int64, k int) int64 {
	return s[1+back(int(s[0]), k, p.logLen)]
}

// back returns the ring index of the k-th most recent entry (1 <= k <= n) of a ring of
// length n whose next write goes to w.
func back(w, k, n int) int {
	if i := w - k; i >= 0 {
		return i
	}
	return w - k + n
}

// block returns the state of bounded rate i.
func (p *Policy) block(s []int64, i int) []int64 {
	return s[p.offset[i] : p.offset[i]+boundedLen]
}

// release gives back the grant of cost units recorded at time at (Decision.Grant), as if
// it had never been made: its entries leave the log, the newer ones move older, and its
// units leave its bucket of each bounded rate; a grant no longer held leaves nothing.
//
// The oldest places left stand for grants the log forgot: never, if it forgot none (it was
// never full). Otherwise the forgotten ones were out of every window once a newer grant
// was admitted, but a decision whose clock reads earlier than the given-back newest grant
// (a clock read before a racing request's, or stepped back) still counts them: the places
// hold a time no earlier than any forgotten grant (the oldest held) and out of every
// window from the newest grant on. Penalty, which records refusals, breaks that, so
// limits that release grants do not use it.
func (p *Policy) release(s []int64, at int64, cost int) {
	cost = max(cost, 1)
	if L := p.logLen; L > 0 {
		w, log := int(s[0]), s[1:1+L]
		forgot := int64(never)
		if oldest := log[w]; oldest != never {
			forgot = min(oldest, log[back(w, 1, L)]-int64(p.longestExact))
		}
		k := 1 // the most recent entry not after at
		for k <= L && log[back(w, k, L)] > at {
			k++
		}
		r := 0 // entries of the grant: k, k+1, ... while they equal at
		for r < min(cost, L) && k+r <= L && log[back(w, k+r, L)] == at {
			r++
		}
		for j := k - 1; j >= 1 && r > 0; j-- {
			log[back(w, j+r, L)] = log[back(w, j, L)]
		}
		for j := 1; j <= r; j++ {
			log[back(w, j, L)] = forgot
		}
		s[0] = int64(back(w, r, L)) // the freed places become the oldest
	}
	for _, i := range p.bounded {
		b := p.block(s, i)
		k := floorDiv(at, p.gran[i])
		if k < b[bLo] || k > b[bNewest] {
			continue // left the window: its bucket may hold a later one's counts now
		}
		j := slot(k)
		n := min(int64(cost), b[j])
		b[j] -= n
		b[bSum] -= n
	}
}

// report fills a decision from the state after recording: per rate, what it has left,
// when its oldest counted grant leaves (Reset), when its newest does (FullReset) and, on
// a refusal, when a request of this cost would fit.
func (p *Policy) report(d *Decision, s []int64, now int64, cost int, allowed bool) {
	d.Allowed, d.Remaining = allowed, math.MaxInt
	var shown int64 // the reported rate's wait; d's RetryAfter and FullReset start at 0
	for i, r := range p.rates {
		T := int64(r.Period)
		var used, retry, reset, whole int64
		if r.exact() {
			used = int64(p.usedSince(s, r.Count, now-T))
			if used > 0 {
				reset = p.nth(s, int(used)) + T - now
				whole = p.nth(s, 1) + T - now
			}
			if !allowed {
				if g := p.nth(s, r.Count-cost+1); g != never {
					retry = max(0, g+T-now)
				}
			}
		} else {
			b, g := p.block(s, i), p.gran[i]
			used = b[bSum]
			if used > 0 { // the oldest bucket that holds a grant leaves first (see expire)
				reset = (b[bLo]+1)*g + T - now
				whole = (b[bNewest]+1)*g + T - now
			}
			if !allowed {
				retry = boundedRetry(b, g, T, now, used+int64(cost)-int64(r.Count))
			}
		}
		// In int64: Penalty's used may be far above the count, and an int wraps on 32 bits.
		rem := int(max(0, int64(r.Count)-used))
		// The reported rate has the fewest left, so that the response never names room
		// another rate lacks; ties go to the longest wait on a refusal, else the latest
		// reset. A refusal's wait is the longest of all rates'.
		tighter := i == 0 || rem < d.Remaining ||
			rem == d.Remaining && (!allowed && retry > shown || allowed && time.Duration(reset) > d.Reset)
		if tighter {
			d.Rate, d.Remaining, d.Reset, shown = r, rem, time.Duration(reset), retry
		}
		d.RetryAfter = max(d.RetryAfter, time.Duration(retry))
		d.FullReset = max(d.FullReset, time.Duration(whole))
	}
}

// usedSince counts the log's n most recent entries that are after t. Entries only get
// older going back, so it gallops back from the newest, then bisects: the cost grows with
// the grants still in the window, not with the count.
func (p *Policy) usedSince(s []int64, n int, t int64) int {
	lo, hi := 0, 1 // entries up to lo are after t; entry hi (if hi <= n) may not be
	for hi <= n && p.nth(s, hi) > t {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, n+1)
	for lo+1 < hi { // entry lo+1 .. hi-1 undecided
		if mid := int(uint(lo+hi) >> 1); p.nth(s, mid) > t {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// keyClock returns now held forward to the newest time s recorded (the newest grant, a
// bounded rate's last decision): a key's clock never runs backwards, whatever the store's.
func (p *Policy) keyClock(s []int64, now int64) int64 {
	if p.logLen > 0 {
		now = max(now, p.nth(s, 1))
	}
	for _, i := range p.bounded {
		now = max(now, s[p.offset[i]+bLast])
	}
	return now
}

// idle reports whether a key with state s holds no grant that any window still counts at
// time now, so that dropping the state cannot change a later decision.
func (p *Policy) idle(s []int64, now int64) bool {
	if p.logLen > 0 {
		if newest := p.nth(s, 1); newest != never && newest > now-int64(p.longestExact) {
			return false
		}
	}
	for _, i := range p.bounded {
		b := p.block(s, i)
		if b[bSum] > 0 && (b[bNewest]+1)*p.gran[i] > now-int64(p.rates[i].Period) {
			return false
		}
	}
	return true
}

// granule is the length of one bucket of a bounded rate: Period/bounds.Buckets, rounded
// up so that bounds.Buckets granules always cover the period.
func granule(r Rate) int64 {
	return (int64(r.Period) + bounds.Buckets - 1) / bounds.Buckets
}

// expire drops the buckets that no longer overlap the window (now-T, now]: counting a
// bucket whole while any of it overlaps keeps the bounded form strict. Then lo moves on
// to the oldest bucket that holds a grant, whose leaving is the Reset.
func expire(b []int64, r Rate, g, now int64) {
	if lo := max(floorDiv(now-int64(r.Period), g), b[bLo]); lo > b[bLo] {
		for k := b[bLo]; k < lo && b[bSum] != 0 && k < b[bLo]+bounds.Buckets+1; k++ {
			b[bSum] -= b[slot(k)]
			b[slot(k)] = 0
		}
		b[bLo] = lo
	}
	for b[bSum] > 0 && b[bLo] < b[bNewest] && b[slot(b[bLo])] == 0 {
		b[bLo]++
	}
}

// recordBounded counts cost units in the bucket of now. A bucket full to the rate's count
// refuses every request on its own, so it takes no more: that keeps Penalty's recorded
// refusals from overflowing the sum.
func recordBounded(b []int64, g, now int64, cost, count int) {
	k := max(floorDiv(now, g), b[bNewest])
	if b[bSum] == 0 {
		b[bLo] = k // the only bucket that holds a grant, so the oldest (see expire)
	}
	j := slot(k)
	if add := min(int64(cost), int64(count)-b[j]); add > 0 {
		b[j] += add
		b[bSum] += add
	}
	b[bNewest] = k
}

// boundedRetry returns how long until need units leave the window: bucket k leaves it
// once now-T reaches the end of k.
func boundedRetry(b []int64, g, T, now, need int64) int64 {
	if need <= 0 {
		return 0 // this rate has room; another one refused
	}
	var freed int64
	k := b[bLo]
	for ; k < b[bNewest]; k++ {
		if freed += b[slot(k)]; freed >= need {
			break
		}
	}
	return max(0, (k+1)*g+T-now)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// slot returns the index in a bounded block of bucket k's count.
func slot(k int64) int {
	return bCounts + int(k-floorDiv(k, bounds.Buckets+1)*(bounds.Buckets+1))
}
