package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// compactPair drives a WithCompact Redis store and core's compact log side by side, on one
// virtual clock.
type compactPair struct {
	t      *testing.T
	p      *core.Policy
	clock  *storetest.ManualClock
	store  *redisstore.Store
	state  []int64
	grants []compactGrant
	strict bool // the clock never went back: check admissions against the exact window
	admits []time.Time
	step   int
	trace  []string
}

type compactGrant struct {
	engine, redis int64
	cost          int
}

func newCompactPair(t *testing.T, text string, start time.Time) *compactPair {
	p := mustParse(text)
	clock := storetest.NewManualClock(start)
	s := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)),
		redisstore.WithClock(clock.Now), redisstore.WithDenyCache(false), redisstore.WithCompact(true))
	return &compactPair{t: t, p: p, clock: clock, store: s, state: redisstore.EngineState(p, true), strict: true}
}

// decide advances the clock by adv and decides on both; it reports a mismatch (fatal
// when fatal) and returns the store's decision.
func (r *compactPair) decide(adv time.Duration, cost int, mode core.Mode, fatal bool) (core.Decision, bool) {
	r.t.Helper()
	r.step++
	if adv < 0 {
		r.strict = false
	}
	now := r.clock.Advance(adv)
	r.trace = append(r.trace, fmt.Sprintf("d(%d, %d, %v) // t=%d", adv/time.Microsecond, cost, mode, now.UnixMicro()))
	want, err := redisstore.EngineDecide(r.p, true, r.state, now.UnixNano(), cost, mode)
	if err != nil {
		r.t.Fatal(err)
	}
	got, err := r.store.Decide(context.Background(), core.Query{Policy: r.p, Key: "k", Cost: cost, Mode: mode})
	if err != nil {
		r.t.Fatalf("step %d: %v", r.step, err)
	}
	ok := true
	if got.Allowed && want.Allowed && mode == core.Enforce {
		if got.Grant*1000 != want.Grant {
			r.t.Errorf("step %d: grant %d µs, engine %d ns", r.step, got.Grant, want.Grant)
			ok = false
		}
		r.grants = append(r.grants, compactGrant{want.Grant, got.Grant, max(cost, 1)})
	}
	if got.Allowed && mode != core.Peek {
		for range max(cost, 1) {
			r.admits = append(r.admits, now)
		}
		if r.strict && mode == core.Enforce {
			// strictness: at most N in (now - T, now]
			rate := r.p.Rates()[0]
			in := 0
			for _, a := range r.admits {
				if now.Sub(a) < rate.Period {
					in++
				}
			}
			if in > rate.Count {
				r.t.Errorf("step %d: STRICTNESS: %d admitted within %v ending %v", r.step, in, rate.Period, now)
				ok = false
			}
		}
	}
	g2, w2 := got, want
	g2.Grant, w2.Grant = 0, 0
	if g2 != w2 {
		ok = false
		msg := fmt.Sprintf("step %d (t=%v, cost %d, %v):\n got %+v\nwant %+v", r.step, now.UnixMicro(), cost, mode, g2, w2)
		if len(r.trace) > 40 {
			r.trace = r.trace[len(r.trace)-40:]
		}
		for _, l := range r.trace {
			r.t.Log(l)
		}
		if fatal {
			r.t.Fatal(msg)
		}
		r.t.Error(msg)
	}
	return got, ok
}

func (r *compactPair) release(i int) {
	r.t.Helper()
	g := r.grants[i]
	r.trace = append(r.trace, fmt.Sprintf("release(%d) // grant %d", i, g.redis))
	r.grants = append(r.grants[:i], r.grants[i+1:]...)
	redisstore.EngineRelease(r.p, true, r.state, g.engine, g.cost)
	if err := r.store.Release(context.Background(), core.Query{Policy: r.p, Key: "k", Cost: g.cost}, g.redis); err != nil {
		r.t.Fatal(err)
	}
	r.strict = false // released grants no longer count
}

// TestCompactMatchesEngineFuzz: random sequences through a WithCompact store and core's
// compact log side by side, over more periods than TestMatchesEngine (down to 1 ms, whose
// units would be finer than a microsecond and so keep the exact log, and up to a day),
// with long idle gaps, steps back of up to 2T and grants given back.
func TestCompactMatchesEngineFuzz(t *testing.T) {
	needRedis(t)
	for _, text := range []string{"3/10ms", "2/1ms", "4/17ms", "1/1s", "3/1s", "5/3s", "7/1h", "4/1d", "256/100ms", "200/1m", "2/333ms", "3/32768us", "3/32769us", "3/16384us", "3/16385us"} {
		for _, back := range []bool{false, true} {
			for _, rel := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/back=%v/rel=%v", text, back, rel), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(len(text)), 11))
					r := newCompactPair(t, text, time.Unix(1_700_000_000, 0))
					T := r.p.Rates()[0].Period
					N := r.p.Rates()[0].Count
					for range 800 {
						if rel && len(r.grants) > 0 && rng.IntN(5) == 0 {
							r.release(rng.IntN(len(r.grants)))
						}
						var adv time.Duration
						switch rng.IntN(12) {
						case 0:
						case 1:
							adv = time.Duration(rng.Int64N(int64(5 * T)))
						case 2:
							if back {
								adv = -time.Duration(rng.Int64N(int64(2*T) + 1))
							}
						case 3:
							if back {
								adv = -time.Duration(rng.Int64N(int64(T/20) + 1))
							}
						case 4:
							// land on a unit edge-ish: whole multiples of T/16
							adv = T / 16 * time.Duration(rng.IntN(20))
						default:
							adv = time.Duration(rng.Int64N(int64(T/time.Duration(N+1)) + 1))
						}
						adv = adv.Truncate(time.Microsecond)
						cost, mode := randomAsk(rng, 4, 1, min(N, 5), 10)
						if _, ok := r.decide(adv, cost, mode, false); !ok {
							t.FailNow()
						}
					}
				})
			}
		}
	}
}

// TestCompactStoreStepBackShortPeriod: a compact store's policy too short for compact
// units (the exact log) answers as the engine after a step back of a microsecond.
func TestCompactStoreStepBackShortPeriod(t *testing.T) {
	needRedis(t)
	r := newCompactPair(t, "3/10ms", time.Unix(1_700_000_000, 0))
	r.decide(0, 2, core.Enforce, true)
	r.decide(10*time.Millisecond, 1, core.Enforce, true)
	r.decide(-time.Microsecond, 1, core.Peek, true)
}

// TestCompactStepBackAfterGrantOnUnitEdge: a grant recorded on a unit's edge finds the
// entries exactly T older out of its window; a decision after the clock steps back a
// microsecond is judged a unit earlier, where they count again. The header's count of
// entries out (b), where Remaining's search starts, must not have counted them.
func TestCompactStepBackAfterGrantOnUnitEdge(t *testing.T) {
	needRedis(t)
	r := newCompactPair(t, "3/1s", time.Unix(1_700_000_000, 0))
	r.decide(0, 2, core.Enforce, true)
	r.decide(time.Second, 1, core.Enforce, true)
	r.decide(-time.Microsecond, 1, core.Peek, true)
}

// TestCompactEmptiedRingKeepsBase: once every grant is given back the ring is empty, and
// a grant after the clock stepped back more than T is recorded no earlier than the key's
// base, as core's compact log records it.
func TestCompactEmptiedRingKeepsBase(t *testing.T) {
	needRedis(t)
	r := newCompactPair(t, "1/1s", time.Unix(1_700_000_000, 0))
	r.decide(0, 1, core.Enforce, true)
	r.release(0)
	r.decide(-2*time.Second, 1, core.Enforce, true)
}

// TestCompactBaseMoveDropsOldGrants: when the base moves, grants older than a period
// before the new grant are dropped, as core's compact log drops them: after the newest is
// given back and the clock steps back, they must not count in the window again.
func TestCompactBaseMoveDropsOldGrants(t *testing.T) {
	needRedis(t)
	r := newCompactPair(t, "2/1s", time.Unix(1_700_000_000, 0))
	r.decide(0, 1, core.Enforce, true)
	r.decide(2500*time.Millisecond, 1, core.Enforce, true) // rebase: 50000+20001 units > 65535
	r.release(1)
	r.decide(-100*time.Microsecond, 2, core.Enforce, true)
}

// TestCompactStrictFuzz: many seeds, with the clock only going forward: every answer
// matches the engine's, and no interval of length T ever holds more than N admissions.
func TestCompactStrictFuzz(t *testing.T) {
	needRedis(t)
	for _, text := range []string{"3/10ms", "5/1ms", "4/1s", "256/1s", "100/100ms", "6/1h", "3/1d", "2/32769us"} {
		for seed := range uint64(8) {
			rel := seed >= 4
			t.Run(fmt.Sprintf("%s/%d", text, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				r := newCompactPair(t, text, time.Unix(1_700_000_000, int64(rng.IntN(1000000))*1000))
				T := r.p.Rates()[0].Period
				N := r.p.Rates()[0].Count
				for range 600 {
					if rel && len(r.grants) > 0 && rng.IntN(4) == 0 {
						r.release(rng.IntN(len(r.grants)))
					}
					var adv time.Duration
					switch rng.IntN(14) {
					case 0, 1:
					case 2:
						adv = time.Duration(rng.Int64N(int64(3 * T)))
					case 3:
						adv = time.Duration(rng.Int64N(int64(400 * T))) // long idle gap
					case 4:
						adv = T / 8 * time.Duration(rng.IntN(12))
					case 5:
						adv = time.Microsecond * time.Duration(rng.IntN(3))
					default:
						adv = time.Duration(rng.Int64N(int64(2*T/time.Duration(N)) + 1))
					}
					adv = adv.Truncate(time.Microsecond)
					cost, mode := randomAsk(rng, 3, 1, N, 8)
					if _, ok := r.decide(adv, cost, mode, false); !ok {
						t.FailNow()
					}
				}
			})
		}
	}
}

// TestCompactExpiryOnServerTime: on the server's clock, after every grant, including ones
// that move the base of a full ring, the key lives at least one period more.
func TestCompactExpiryOnServerTime(t *testing.T) {
	needRedis(t)
	c := newClient(t, standalone)
	for _, text := range []string{"2/50ms", "3/10ms", "1/20ms"} {
		p := mustParse(text)
		T := p.Rates()[0].Period
		s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false), redisstore.WithCompact(true))
		key := s.Key(p, "", "k")
		for i := range 40 {
			gap := T / 3
			if i%7 == 3 {
				gap = 3 * T // a rebase
			}
			time.Sleep(gap)
			start := time.Now()
			d, err := s.Decide(context.Background(), core.Query{Policy: p, Key: "k"})
			if err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(context.Background(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			// PTTL counts whole milliseconds down from the script's own reading, at most
			// the two round trips ago. A key gone (PTTL -2) fails this too while the grant
			// is younger than T.
			if lo := T - time.Since(start) - time.Millisecond; d.Allowed && ttl < lo {
				t.Errorf("%s step %d: PTTL %v after a grant, want >= %v", text, i, ttl, lo)
			}
			// A key without an expiry (-1) is never cleaned up. One already gone (-2) is
			// no fault otherwise: after a refusal its newest grant may have been almost T
			// old, and a stall between the two calls (T is 10 to 50 ms here) can outlast
			// the rest of its expiry.
			if ttl == -1 {
				t.Errorf("%s step %d: PTTL %v: the key has no expiry", text, i, ttl)
			}
		}
	}
}

// randomAsk returns a random request: one in costOneIn costs from lo to hi (else 1), one
// in modeOneIn is Penalty and another Peek (else Enforce).
func randomAsk(rng *rand.Rand, costOneIn, lo, hi, modeOneIn int) (int, core.Mode) {
	cost := 1
	if rng.IntN(costOneIn) == 0 {
		cost = lo + rng.IntN(hi-lo+1)
	}
	switch rng.IntN(modeOneIn) {
	case 0:
		return cost, core.Penalty
	case 1:
		return cost, core.Peek
	}
	return cost, core.Enforce
}
