package core

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The engine works on a key's state: a []int64 of p.stateLen slots, laid out as
//
//	[0]                  write index of the grant log (the slot the next grant overwrites)
//	[1 : 1+logLen]       ring of the last logLen grant times (never = empty)
//	then per bounded rate boundedLen slots: lo, sum, newest, last, counts[boundedBuckets+1]
//
// A rate's state has one of two encodings. Every exact rate (Count up to exactMax) reads
// the one log: a request of cost c fits rate N per T if the (N-c+1)-th most recent grant
// is at least T old. A bounded rate counts its grants in boundedBuckets+1 buckets of
// Period/boundedBuckets, each counted whole while any of it overlaps the window, so it
// never counts fewer grants than the window holds. Times are int64 nanoseconds on the
// store's clock. The Redis scripts keep the same layout.
const (
	never      = math.MinInt64
	boundedLen = 4 + boundedBuckets + 1
)

// newState returns the state of a key that holds no grant.
func (p *Policy) newState() []int64 {
	s := make([]int64, p.stateLen)
	p.resetState(s)
	return s
}

// resetState clears s, of length stateLen, to hold no grant.
func (p *Policy) resetState(s []int64) {
	clear(s)
	for i := 1; i <= p.logLen; i++ {
		s[i] = never
	}
}

// apply decides a request of the given cost for a key whose state is s, at time now
// (nanoseconds on any monotonic clock the caller keeps for that key), records it as mode
// says, and writes the decision into *d, which the caller has zeroed. It is the one rule
// every in-process store shares, as x/time/rate's reserveN is: no lock, no clock read, so
// the caller serializes calls on one state and passes the time in. A time earlier than one
// already recorded counts as that time, so racing clock reads cannot unsort the log. A cost
// below 1 counts as 1; a cost above some rate's Count fails with ErrCostTooHigh.
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
			continue
		}
		b := p.block(s, i)
		expire(b, r, p.gran[i], now)
		allowed = allowed && b[bSum]+int64(cost) <= int64(r.Count)
	}
	if mode == Penalty || allowed && mode == Enforce {
		p.record(s, now, cost)
		d.Grant = now
	}
	for i := range p.bounded {
		s[p.offset[p.bounded[i]]+bLast] = now
	}
	p.report(d, s, now, cost, allowed)
	return nil
}

// nth returns the k-th most recent grant time in the log (1 <= k <= logLen).
func (p *Policy) nth(s []int64, k int) int64 {
	return s[1+back(int(s[0]), k, p.logLen)]
}

// block returns the state of bounded rate i.
func (p *Policy) block(s []int64, i int) []int64 {
	return s[p.offset[i] : p.offset[i]+boundedLen]
}

// record counts a grant of cost units at now in every rate: cost entries in the log (at
// most its length: a rate never looks further back), and cost units in now's bucket of
// each bounded rate.
func (p *Policy) record(s []int64, now int64, cost int) {
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
}

// release gives back the grant of cost units recorded at time at (Decision.Grant) in state
// s: its entries leave the log, the newer ones move one place older for each, and the
// oldest places left free hold never; its units leave its bucket of each bounded rate.
// Every other grant stays where it was, so the state is exactly what it would be had the
// grant never been made. A grant no longer held (it has left every window and been
// overwritten, or the key was reset) leaves nothing to give back.
//
// The log then holds fewer than logLen grants, and the never in the oldest place stands
// for grants older than those it held, which it forgot as newer grants were admitted: each
// was forgotten when a grant at least the longest exact period younger was recorded (that
// is what admitted it), so none of them counts in any window a later decision looks at.
// Penalty mode records refusals, which breaks that reasoning; limits that release grants
// do not use it (see WithCountWhen).
func (p *Policy) release(s []int64, at int64, cost int) {
	cost = max(cost, 1)
	if L := p.logLen; L > 0 {
		w := int(s[0])
		log := s[1 : 1+L]
		k := 1 // the most recent entry not after at
		for k <= L && log[back(w, k, L)] > at {
			k++
		}
		r := 0 // entries of the grant: k, k+1, ... while they equal at
		for r < min(cost, L) && k+r <= L && log[back(w, k+r, L)] == at {
			r++
		}
		if r > 0 {
			for j := k - 1; j >= 1; j-- {
				log[back(w, j+r, L)] = log[back(w, j, L)]
			}
			for j := 1; j <= r; j++ {
				log[back(w, j, L)] = never
			}
			w = back(w, r, L)
			s[0] = int64(w)
		}
	}
	for _, i := range p.bounded {
		b := p.block(s, i)
		k := floorDiv(at, p.gran[i])
		if k < b[bLo] || k > b[bNewest] {
			continue // left the window: its bucket may hold a later one's counts now
		}
		i := bCounts + mod(k, boundedBuckets+1)
		n := min(int64(cost), b[i])
		b[i] -= n
		b[bSum] -= n
	}
}

func (p *Policy) checkCost(cost int) error {
	for _, r := range p.rates {
		if cost > r.Count {
			return fmt.Errorf("cost %d, rate %v: %w", cost, r, ErrCostTooHigh)
		}
	}
	return nil
}

// report fills a decision from the state after recording: per rate, what it has left,
// when its oldest counted grant leaves (Reset), when its newest does (FullReset) and, on a
// refusal, when a request of this cost would fit.
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
			if g := p.nth(s, r.Count-cost+1); !allowed && g != never {
				retry = max(0, g+T-now)
			}
		} else {
			b, g := p.block(s, i), p.gran[i]
			used = b[bSum]
			if used > 0 {
				// The oldest bucket that holds a grant (lo, see expire) leaves first:
				// nothing more fits before, and the quota grows then. On a refusal it is
				// the wait, exact.
				reset = (b[bLo]+1)*g + T - now
				whole = (b[bNewest]+1)*g + T - now
			}
			if !allowed {
				retry = boundedRetry(b, g, T, now, used+int64(cost)-int64(r.Count))
			}
		}
		rem := left(r, used)
		// The reported rate is the one with the fewest left: the response's r must never
		// name room another rate lacks. Ties go to the longest wait (on a refusal, which
		// then reports the rate that refuses longest) or, admitted, the latest reset. A
		// refusal's wait is the longest of all rates', whichever is reported.
		tighter := false
		switch {
		case i == 0:
			tighter = true
		case !allowed:
			tighter = rem < d.Remaining || (rem == d.Remaining && retry > shown)
		default:
			tighter = rem < d.Remaining || (rem == d.Remaining && time.Duration(reset) > d.Reset)
		}
		if tighter {
			d.Rate, d.Remaining, d.Reset, shown = r, rem, time.Duration(reset), retry
		}
		d.RetryAfter = max(d.RetryAfter, time.Duration(retry))
		d.FullReset = max(d.FullReset, time.Duration(whole))
	}
}

// keyClock returns now held forward to the newest time state s recorded (an exact
// rate's newest grant, a bounded rate's last decision), as apply holds it: the key's
// clock never runs backwards, whatever the store's does.
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
		if b[bSum] > 0 && (b[bNewest]+1)*p.gran[i] > now-int64(p.rates[i].Period) { // no sum past MaxInt64
			return false
		}
	}
	return true
}

// back returns the ring index of the k-th most recent entry (1 <= k <= n) of a ring of
// length n whose next write goes to w.
func back(w, k, n int) int {
	if i := w - k; i >= 0 {
		return i
	}
	return w - k + n
}

// left is what r has left with used units counted: none when over it. used is an int64
// and may be far above the count (Penalty records refusals too), so it is compared as
// one: as an int it would wrap on 32-bit platforms, into room that is not there.
func left(r Rate, used int64) int {
	return int(max(0, int64(r.Count)-used))
}

// usedSince counts the grants after cutoff among the last n of the log. Entries only get
// older as k grows, so it gallops from the newest (1, 2, 4, ...) and then bisects:
// O(log used), and a client well under its limit, the common case, costs a step or two.
func (p *Policy) usedSince(s []int64, n int, cutoff int64) int {
	if p.nth(s, n) > cutoff {
		return n
	}
	lo, hi := 0, 1 // entry lo is after cutoff (lo 0: none checked), entry hi is not
	for hi < n && p.nth(s, hi) > cutoff {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, n)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if p.nth(s, mid) > cutoff {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Slots of a bounded rate's block.
const (
	bLo     = 0 // lowest bucket index still counted: the oldest that holds a grant, if any does
	bSum    = 1 // sum of counts
	bNewest = 2 // bucket index of the newest grant
	bLast   = 3 // the latest decision time seen, so time never runs backwards for the key
	bCounts = 4
)

// granule is the length of one bucket of a bounded rate: Period/boundedBuckets, rounded
// up so that boundedBuckets granules always cover the period.
func granule(r Rate) int64 {
	return (int64(r.Period) + boundedBuckets - 1) / boundedBuckets
}

// expire drops the buckets that no longer overlap the window (now-T, now]. A bucket is
// counted whole while any part of it overlaps, so the count never falls short of the
// grants in the window; that is what keeps the bounded form strict.
//
// Then lo moves past empty buckets to the oldest that holds a grant, which leads: Reset is
// when it leaves. Each bucket is passed once, so a busy key pays one look per decision.
func expire(b []int64, r Rate, g, now int64) {
	if lo := bucketFrom(b[bLo], now-int64(r.Period), g); lo > b[bLo] {
		if b[bSum] != 0 {
			if lo-b[bLo] >= boundedBuckets+1 {
				clear(b[bCounts:])
				b[bSum] = 0
			} else {
				for k := b[bLo]; k < lo; k++ {
					i := bCounts + mod(k, boundedBuckets+1)
					b[bSum] -= b[i]
					b[i] = 0
				}
			}
		}
		b[bLo] = lo
	}
	if b[bSum] > 0 {
		for b[bLo] < b[bNewest] && b[bCounts+mod(b[bLo], boundedBuckets+1)] == 0 {
			b[bLo]++
		}
	}
}

// recordBounded counts cost units in the bucket of now. A bucket holds at most the rate's count:
// one that full refuses every request on its own until it leaves the window, so more in it
// would change no decision and no reported time, and the cap keeps Penalty's recording of
// refusals from growing a sum without bound (it would overflow, and then admit).
func recordBounded(b []int64, g, now int64, cost, count int) {
	k := bucketFrom(b[bNewest], now, g)
	if b[bSum] == 0 {
		b[bLo] = k // the only bucket that holds a grant, so the oldest (see expire)
	}
	i := bCounts + mod(k, boundedBuckets+1)
	if add := min(int64(cost), int64(count)-b[i]); add > 0 {
		b[i] += add
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
	for k := b[bLo]; k <= b[bNewest]; k++ {
		freed += b[bCounts+mod(k, boundedBuckets+1)]
		if freed >= need {
			return max(0, (k+1)*g+T-now)
		}
	}
	return max(0, (b[bNewest]+1)*g+T-now)
}

// bucketFrom returns max(floorDiv(t, g), k): k without dividing while t is before the
// end of bucket k, as it is for most decisions on a busy key. k is the bucket of a time
// the key's state holds, more than a period above MinInt64 (now-T is taken), so k*g cannot
// overflow; t-k*g can, and is compared unsigned.
func bucketFrom(k, t, g int64) int64 {
	if start := k * g; t < start || uint64(t-start) < uint64(g) {
		return k
	}
	return max(floorDiv(t, g), k)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func mod(k int64, n int) int {
	m := int(k % int64(n))
	if m < 0 {
		m += n
	}
	return m
}

func itoa(n int) string { return strconv.Itoa(n) }
