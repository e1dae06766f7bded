package core

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// The engine's view for tests that hold another store to it decision for decision: with
// compact, a policy of one exact rate is decided on the memory store's compact log
// (compact.go), as the Redis store's WithCompact decides it. Grants are in nanoseconds.
func init() {
	hook.NewState = func(p any, compact bool) []int64 {
		if p := p.(*Policy); compact && p.single {
			return make([]int64, compactLen(p.rates[0].Count))
		}
		return p.(*Policy).newState()
	}
	hook.DecideState = func(p any, compact bool, s []int64, now int64, cost int, mode uint8) (any, error) {
		if p := p.(*Policy); compact && p.single {
			var d Decision
			err := p.applyCompact(&d, s, now, cost, Mode(mode))
			d.Grant *= p.units.u
			return d, err
		}
		return p.(*Policy).decideState(s, now, cost, Mode(mode))
	}
	hook.ReleaseState = func(p any, compact bool, s []int64, grant int64, cost int) {
		if p := p.(*Policy); compact && p.single {
			p.releaseCompact(s, grant/p.units.u, cost)
			return
		}
		p.(*Policy).release(s, grant, cost)
	}
}

// The engine works on a key's state: a []int64 of p.stateLen slots, laid out as
//
//	[0]                  write index of the grant log (the slot the next grant overwrites)
//	[1 : 1+logLen]       ring of the last logLen grant times (never = empty)
//	then per bounded rate boundedLen slots: lo, sum, newest, last, counts[boundedBuckets+1]
//
// One log serves every exact rate of the policy: a request of cost c fits rate N per T if
// the (N-c+1)-th most recent grant is at least T old, an O(1) lookup. Times are int64
// nanoseconds on the store's clock.
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

// decideState decides a request of the given cost for a key whose state is s, at time now
// (nanoseconds on any monotonic clock the caller keeps for that key), records it as mode
// says, and returns the decision. It is the engine every in-process store shares; the
// caller serializes calls on one state. A time earlier than one already recorded counts
// as that time, so racing clock reads cannot unsort the log. A cost below 1 counts as 1; a
// cost above some rate's Count fails with ErrCostTooHigh.
func (p *Policy) decideState(s []int64, now int64, cost int, mode Mode) (Decision, error) {
	var d Decision
	err := p.apply(&d, s, now, cost, mode)
	return d, err
}

// apply is decideState writing into *d, which the caller has zeroed: stores call it with
// their own result, so that a decision is written once rather than copied out of every
// frame on the way.
func (p *Policy) apply(d *Decision, s []int64, now int64, cost int, mode Mode) error {
	if p.takesOne(cost, mode) {
		p.applyOne(d, s, now)
		return nil
	}
	if cost < 1 {
		cost = 1
	}
	if cost > p.minCount {
		return p.checkCost(cost)
	}
	if p.single {
		p.applySingle(d, s, now, cost, mode)
		return nil
	}
	if len(p.rates) == 1 {
		p.applyBounded(d, s[1:1+boundedLen], now, cost, mode)
		return nil
	}
	p.applyRates(d, s, now, cost, mode)
	return nil
}

// applyRates is apply for any policy, looping over its rates.
func (p *Policy) applyRates(d *Decision, s []int64, now int64, cost int, mode Mode) {
	L := p.logLen
	w := int(s[0])
	log := s[1 : 1+L]
	if L > 0 {
		if newest := log[back(w, 1, L)]; now < newest {
			now = newest
		}
	}
	for j, ri := range p.bounded {
		b := s[1+L+j*boundedLen : 1+L+(j+1)*boundedLen]
		now = max(now, b[bLast])
		expire(b, p.rates[ri], p.gran[ri], now)
	}

	allowed := true
	j := 0
	for _, r := range p.rates {
		if r.exact() {
			if log[back(w, r.Count-cost+1, L)] > now-int64(r.Period) {
				allowed = false
			}
			continue
		}
		b := s[1+L+j*boundedLen : 1+L+(j+1)*boundedLen]
		j++
		if b[bSum]+int64(cost) > int64(r.Count) {
			allowed = false
		}
	}

	if mode == Penalty || (allowed && mode == Enforce) {
		for range min(cost, L) {
			log[w] = now
			if w++; w == L {
				w = 0
			}
		}
		s[0] = int64(w)
		for j, ri := range p.bounded {
			b := s[1+L+j*boundedLen : 1+L+(j+1)*boundedLen]
			record(b, p.gran[ri], now, cost, p.rates[ri].Count)
		}
		d.Grant = now
	}
	for j := range p.bounded {
		s[1+L+j*boundedLen+bLast] = now
	}
	p.report(d, s, now, cost, allowed)
}

// applySingle is apply for the most common policy, one exact rate, in straight-line code:
// the same answers (the oracle tests hold it to that), without the loops over rates.
func (p *Policy) applySingle(d *Decision, s []int64, now int64, cost int, mode Mode) {
	r := p.rates[0]
	N, T := r.Count, int64(r.Period)
	log := s[1 : 1+N]
	w := int(s[0])
	if newest := log[back(w, 1, N)]; now < newest {
		now = newest
	}
	k := N - cost + 1
	allowed := log[back(w, k, N)] <= now-T
	if mode == Penalty || (allowed && mode == Enforce) {
		for range cost {
			log[w] = now
			if w++; w == N {
				w = 0
			}
		}
		s[0] = int64(w)
		d.Grant = now
	}
	used := usedSince(log, w, now-T)
	d.Allowed, d.Rate, d.Remaining = allowed, r, N-used
	if used > 0 {
		d.Reset = time.Duration(log[back(w, used, N)] + T - now)
		d.FullReset = time.Duration(log[back(w, 1, N)] + T - now)
	}
	if g := log[back(w, k, N)]; !allowed && g != never {
		d.RetryAfter = time.Duration(max(0, g+T-now))
	}
}

// takesOne reports whether a request of cost (below 1 counts as 1) in mode is decided by
// applyOne: the usual request, on one exact rate. A count is at least 1, so the cost fits.
func (p *Policy) takesOne(cost int, mode Mode) bool {
	return p.single && cost <= 1 && mode == Enforce
}

// applyOne is applySingle for the usual request, of cost 1 under Enforce: the grant that
// would leave the window to make room is the oldest, at the write index, and the newest,
// the one before it, is the one just recorded if any was. The same answers as
// applySingle's (the oracle tests hold it to that).
func (p *Policy) applyOne(d *Decision, s []int64, now int64) {
	r := p.rates[0]
	N, T := r.Count, int64(r.Period)
	log := s[1 : 1+N]
	w := int(s[0])
	newest := log[back(w, 1, N)]
	now = max(now, newest)
	cutoff := now - T
	oldest := log[w]
	allowed := oldest <= cutoff
	if allowed {
		log[w] = now
		if w++; w == N {
			w = 0
		}
		s[0] = int64(w)
		d.Grant, newest = now, now
	}
	used := usedSince(log, w, cutoff)
	d.Allowed, d.Rate, d.Remaining = allowed, r, N-used
	if used > 0 {
		d.Reset = time.Duration(log[back(w, used, N)] + T - now)
		d.FullReset = time.Duration(newest + T - now)
	}
	if !allowed && oldest != never {
		d.RetryAfter = time.Duration(max(0, oldest+T-now))
	}
}

// applyBounded is apply for a policy of one bounded rate, whose state after the unused
// write index is that rate's block, in straight-line code: the same answers as apply's
// loops (the oracle tests hold it to that).
func (p *Policy) applyBounded(d *Decision, b []int64, now int64, cost int, mode Mode) {
	r := p.rates[0]
	g, T := p.gran[0], int64(r.Period)
	now = max(now, b[bLast])
	expire(b, r, g, now)
	allowed := b[bSum]+int64(cost) <= int64(r.Count)
	if mode == Penalty || (allowed && mode == Enforce) {
		record(b, g, now, cost, r.Count)
		d.Grant = now
	}
	b[bLast] = now
	used := b[bSum]
	d.Allowed, d.Rate, d.Remaining = allowed, r, left(r, used)
	if used > 0 {
		d.Reset = time.Duration((b[bLo]+1)*g + T - now)
		d.FullReset = time.Duration(max(0, (b[bNewest]+1)*g+T-now))
	}
	if !allowed {
		d.RetryAfter = time.Duration(boundedRetry(b, g, T, now, used+int64(cost)-int64(r.Count)))
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
	for j, ri := range p.bounded {
		b := s[1+p.logLen+j*boundedLen : 1+p.logLen+(j+1)*boundedLen]
		k := floorDiv(at, p.gran[ri])
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

// report fills a decision from the state after recording.
func (p *Policy) report(d *Decision, s []int64, now int64, cost int, allowed bool) {
	L := p.logLen
	w := int(s[0])
	log := s[1 : 1+L]
	d.Allowed, d.Remaining = allowed, math.MaxInt
	var shown int64 // the reported rate's wait; d's RetryAfter and FullReset start at 0
	j := 0
	for i, r := range p.rates {
		T := int64(r.Period)
		var used, retry, reset, whole int64
		if r.exact() {
			used = int64(usedInLog(log, w, r.Count, now-T))
			if used > 0 {
				reset = log[back(w, int(used), L)] + T - now
				whole = log[back(w, 1, L)] + T - now
			}
			if g := log[back(w, r.Count-cost+1, L)]; !allowed && g != never {
				retry = max(0, g+T-now)
			}
		} else {
			b := s[1+L+j*boundedLen : 1+L+(j+1)*boundedLen]
			j++
			used = b[bSum]
			g := p.gran[i]
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
	L := p.logLen
	if L > 0 {
		now = max(now, s[1+back(int(s[0]), 1, L)])
	}
	for j := range p.bounded {
		now = max(now, s[1+L+j*boundedLen+bLast])
	}
	return now
}

// idle reports whether a key with state s holds no grant that any window still counts at
// time now, so that dropping the state cannot change a later decision.
func (p *Policy) idle(s []int64, now int64) bool {
	L := p.logLen
	if L > 0 {
		if newest := s[1+back(int(s[0]), 1, L)]; newest != never && newest > now-int64(p.longestExact) {
			return false
		}
	}
	for j, ri := range p.bounded {
		b := s[1+L+j*boundedLen : 1+L+(j+1)*boundedLen]
		r := p.rates[ri]
		if b[bSum] > 0 && (b[bNewest]+1)*p.gran[ri] > now-int64(r.Period) { // no sum past MaxInt64
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

// usedSince counts the grants after cutoff in the whole log of a single exact rate, w
// its write index. A client well under its limit holds a grant or two in the window:
// counted without the search.
func usedSince(log []int64, w int, cutoff int64) int {
	N := len(log)
	switch {
	case log[back(w, 1, N)] <= cutoff:
		return 0
	case N == 1 || log[back(w, 2, N)] <= cutoff:
		return 1
	}
	return usedInLog(log, w, N, cutoff)
}

// usedInLog counts the grants after cutoff among the last n of the log. Entries only get
// older as k grows, so it gallops from the newest (1, 2, 4, ...) and then bisects:
// O(log used), and a client well under its limit, the common case, costs a step or two.
func usedInLog(log []int64, w, n int, cutoff int64) int {
	L := len(log)
	if log[back(w, n, L)] > cutoff {
		return n
	}
	lo, hi := 0, 1 // entry lo is after cutoff (lo 0: none checked), entry hi is not
	for hi < n && log[back(w, hi, L)] > cutoff {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, n)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if log[back(w, mid, L)] > cutoff {
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

// record counts cost units in the bucket of now. A bucket holds at most the rate's count:
// one that full refuses every request on its own until it leaves the window, so more in it
// would change no decision and no reported time, and the cap keeps Penalty's recording of
// refusals from growing a sum without bound (it would overflow, and then admit).
func record(b []int64, g, now int64, cost, count int) {
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
