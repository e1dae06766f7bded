package core_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

type oracleGrant struct {
	at   int64 // store-clock reading (ns since the store's first reading)
	cost int
	d    core.Decision
	due  int64 // give back at due; 0 keeps it
	q    core.Query
}

// oracleUsed returns the units of gs in (t-T, t].
func oracleUsed(gs []*oracleGrant, t int64, T time.Duration) int {
	n := 0
	for _, g := range gs {
		if g.at > t-int64(T) && g.at <= t {
			n += g.cost
		}
	}
	return n
}

// oracleMaxWindow returns the most units in any interval (s-T, s] of the grants.
func oracleMaxWindow(gs []*oracleGrant, T time.Duration) (int, int64) {
	most, at := 0, int64(0)
	for _, g := range gs {
		if n := oracleUsed(gs, g.at, T); n > most {
			most, at = n, g.at
		}
	}
	return most, at
}

// TestStoreAgainstAnOracle drives a memory store (sweeping after every decision, tiny MaxKeys or
// none) through random traffic of several keys with costs, clock stands
// and jumps, and give-backs at random later times; the store's answers are compared with a
// brute-force oracle of the grants kept: never more than a rate in any interval, and,
// for exact policies with room for every key, every request that fits admitted, with
// Remaining, RetryAfter, Reset and FullReset exact.
func TestStoreAgainstAnOracle(t *testing.T) {
	type cfg struct {
		policy  *core.Policy
		maxKeys int
	}
	var cases []cfg
	var pols []*core.Policy
	for _, text := range []string{"1/1s", "3/1s,300/1m", "256/1s,257/1s", "5/100ms", "2/10ms,5/1s,400/2s", "257/1s", "4/1s,2/300ms", "256/1s"} {
		pols = append(pols, mustParse(text))
	}
	pols = append(pols, oracleExtraPolicies...)
	for _, pol := range pols {
		for _, mk := range []int{0, 1, 2} {
			cases = append(cases, cfg{pol, mk})
		}
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%s/max%d", c.policy.String(), c.maxKeys), func(t *testing.T) {
			p := c.policy
			rates := p.Rates()
			exact := true
			shortest, minCount := rates[0].Period, rates[0].Count
			for _, r := range rates {
				shortest, minCount = min(shortest, r.Period), min(minCount, r.Count)
				if !r.Exact() {
					exact = false
				}
			}
			slack := func(r core.Rate) int64 {
				if r.Exact() {
					return 0
				}
				return (int64(r.Period) + bounds.Buckets - 1) / bounds.Buckets
			}
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, SweepInterval: -1, MaxKeys: c.maxKeys})
			var now int64
			advance := func(d int64) { clock.Advance(time.Duration(d)); now += d }
			rng := rand.New(rand.NewPCG(uint64(ci), oracleSeed))
			ctx := context.Background()
			keys := []string{"a", "b", "c", "d"}
			kept := map[string][]*oracleGrant{} // grants not given back, per key
			var pending []*oracleGrant          // grants to give back
			full := c.maxKeys != 0              // overflow: strictness only
			for i := 0; i < 1500; i++ {
				switch rng.IntN(20) {
				case 0:
				case 1:
					advance(int64(24 * time.Hour))
				case 2, 3:
					advance(rng.Int64N(oracleCap(shortest)))
				default:
					advance(rng.Int64N(max(1, min(int64(time.Hour), int64(shortest)/10))))
				}
				// Give back what is due.
				for j := 0; j < len(pending); {
					g := pending[j]
					if g.due > now {
						j++
						continue
					}
					if err := s.Release(ctx, g.q, g.d.Grant); err != nil {
						t.Fatal(err)
					}
					kept[g.q.Key] = slices.DeleteFunc(kept[g.q.Key], func(x *oracleGrant) bool { return x == g })
					pending = slices.Delete(pending, j, j+1)
				}
				key := keys[rng.IntN(len(keys))]
				cost := 1 + rng.IntN(min(minCount, 4))
				if rng.IntN(10) == 0 {
					cost = minCount - rng.IntN(2) // near the count
					cost = max(cost, 1)
				}
				q := core.Query{Policy: p, Scope: "r", Key: key, Cost: cost}
				fits, prompt := true, true
				for _, r := range rates {
					u := oracleUsed(kept[key], now, r.Period)
					if u+cost > r.Count {
						fits = false
					}
					if oracleUsed(kept[key], now, r.Period+time.Duration(slack(r)))+cost > r.Count {
						prompt = false
					}
				}
				d, err := s.Decide(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					g := &oracleGrant{at: now, cost: cost, d: d, q: q}
					kept[key] = append(kept[key], g)
					for _, r := range rates {
						if n, at := oracleMaxWindow(kept[key], r.Period); n > r.Count {
							t.Fatalf("request %d key %s cost %d at %d: %d units in (%d-T, %d] for %v (decision %+v)", i, key, cost, now, n, at, at, r, d)
						}
					}
					if rng.IntN(2) == 0 {
						g.due = now + rng.Int64N(oracleCap(shortest))
						pending = append(pending, g)
					}
				}
				if full {
					continue
				}
				if !d.Allowed && prompt {
					t.Fatalf("request %d key %s cost %d at %d: refused although it fits with the documented slack (%+v)", i, key, cost, now, d)
				}
				if d.Allowed && !fits {
					t.Fatalf("request %d key %s cost %d at %d: admitted beyond the limit (%+v)", i, key, cost, now, d)
				}
				if !exact {
					// Bounded: Remaining and RetryAfter within the documented slack.
					remHi, remLo := math.MaxInt, math.MaxInt
					var retryLo, retryHi time.Duration
					for _, r := range rates {
						sl := time.Duration(slack(r))
						u0 := oracleUsed(kept[key], now, r.Period)
						u1 := oracleUsed(kept[key], now, r.Period+sl)
						remHi, remLo = min(remHi, r.Count-u0), min(remLo, r.Count-u1)
						if !d.Allowed {
							retryLo = max(retryLo, oracleRetry(kept[key], now, r, cost, 0))
							retryHi = max(retryHi, oracleRetry(kept[key], now, r, cost, sl))
						}
					}
					if d.Remaining > max(0, remHi) || d.Remaining < max(0, remLo) {
						t.Fatalf("request %d key %s cost %d at %d: Remaining %d, want in [%d, %d] (%+v)", i, key, cost, now, d.Remaining, remLo, remHi, d)
					}
					if d.RetryAfter < retryLo || d.RetryAfter > retryHi {
						t.Fatalf("request %d key %s cost %d at %d: RetryAfter %v, want in [%v, %v] (%+v)", i, key, cost, now, d.RetryAfter, retryLo, retryHi, d)
					}
					continue
				}
				// Exact: every field.
				wantRem := math.MaxInt
				var wantRetry, wantFull time.Duration
				for _, r := range rates {
					used := oracleUsed(kept[key], now, r.Period)
					wantRem = min(wantRem, r.Count-used)
					var win []*oracleGrant
					for _, g := range kept[key] {
						if g.at > now-int64(r.Period) && g.at <= now {
							win = append(win, g)
						}
					}
					slices.SortFunc(win, func(a, b *oracleGrant) int { return cmp.Compare(a.at, b.at) })
					if len(win) > 0 {
						wantFull = max(wantFull, time.Duration(win[len(win)-1].at+int64(r.Period)-now))
					}
					if !d.Allowed {
						need := used + cost - r.Count
						freed := 0
						for _, g := range win {
							if need <= 0 {
								break
							}
							freed += g.cost
							if freed >= need {
								wantRetry = max(wantRetry, time.Duration(g.at+int64(r.Period)-now))
								break
							}
						}
					}
					if r == d.Rate && len(win) > 0 {
						if want := time.Duration(win[0].at + int64(r.Period) - now); d.Reset != want {
							t.Fatalf("request %d key %s cost %d at %d: Reset %v, want %v for %v (%+v)", i, key, cost, now, d.Reset, want, r, d)
						}
					}
				}
				if d.Remaining != max(0, wantRem) {
					t.Fatalf("request %d key %s cost %d at %d: Remaining %d, want %d (%+v)", i, key, cost, now, d.Remaining, wantRem, d)
				}
				if d.RetryAfter != wantRetry {
					t.Fatalf("request %d key %s cost %d at %d: RetryAfter %v, want %v (%+v)", i, key, cost, now, d.RetryAfter, wantRetry, d)
				}
				if d.FullReset != wantFull {
					t.Fatalf("request %d key %s cost %d at %d: FullReset %v, want %v (%+v)", i, key, cost, now, d.FullReset, wantFull, d)
				}
			}
		})
	}
}

var oracleExtraPolicies = []*core.Policy{
	mustPolicy(core.Rate{Count: 3, Period: 1}),
	mustPolicy(core.Rate{Count: 2, Period: time.Microsecond}),
	mustPolicy(core.Rate{Count: 5, Period: 7}),
	mustPolicy(core.Rate{Count: 300, Period: 100}),
	mustPolicy(core.Rate{Count: 5, Period: 7}, core.Rate{Count: 300, Period: time.Microsecond}),
	mustPolicy(core.Rate{Count: 3, Period: 365 * 24 * time.Hour}),
	mustPolicy(core.Rate{Count: 300, Period: 365 * 24 * time.Hour}),
	mustPolicy(core.Rate{Count: 5, Period: core.MaxPeriodForTest}),
	mustPolicy(core.Rate{Count: 300, Period: core.MaxPeriodForTest}, core.Rate{Count: 2, Period: time.Second}),
	mustPolicy(core.Rate{Count: bounds.LargestInt, Period: time.Second}, core.Rate{Count: 4, Period: 10 * time.Millisecond}),
}

var oracleSeed = func() uint64 {
	var s uint64 = 77
	fmt.Sscan(os.Getenv("REQLIMIT_SEED"), &s)
	return s
}()

// oracleCap is twice d, at most a day, at least 1 ns.
func oracleCap(d time.Duration) int64 { return max(1, min(int64(24*time.Hour), int64(d))*2) }

// oracleRetry is how long until a request of cost fits rate r, counting grants in a window of
// r.Period+slack.
func oracleRetry(gs []*oracleGrant, now int64, r core.Rate, cost int, slack time.Duration) time.Duration {
	T := r.Period + slack
	var win []*oracleGrant
	used := 0
	for _, g := range gs {
		if g.at > now-int64(T) && g.at <= now {
			win = append(win, g)
			used += g.cost
		}
	}
	need := used + cost - r.Count
	if need <= 0 {
		return 0
	}
	slices.SortFunc(win, func(a, b *oracleGrant) int { return cmp.Compare(a.at, b.at) })
	freed := 0
	for _, g := range win {
		freed += g.cost
		if freed >= need {
			return time.Duration(g.at + int64(T) - now)
		}
	}
	return 0
}
