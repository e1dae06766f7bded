package nethttp_test

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// told is what one response told its client.
type told struct {
	code int
	ra   int // Retry-After, -1 if absent
	r, t int // the RateLimit member's, -1 if absent
	raw  string
}

var rateLimitMember = regexp.MustCompile(`^"[^"]*";r=(-?\d+);t=(-?\d+)$`)

func parseTold(t *testing.T, w *httptest.ResponseRecorder) told {
	t.Helper()
	r := told{code: w.Code, ra: -1, r: -1, t: -1}
	if v := w.Header().Get("Retry-After"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("Retry-After %q", v)
		}
		r.ra = n
	}
	r.raw = w.Header().Get("RateLimit")
	if r.raw != "" {
		m := rateLimitMember.FindStringSubmatch(r.raw)
		if m == nil {
			t.Fatalf("RateLimit %q does not parse", r.raw)
		}
		r.r, _ = strconv.Atoi(m[1])
		r.t, _ = strconv.Atoi(m[2])
	}
	return r
}

// truthTarget builds a fresh limited handler on a fresh store reading clock.
type truthTarget func(t *testing.T, clock func() time.Time) http.Handler

type arrival struct {
	at   time.Duration // since the epoch below
	cost int
	fail bool // the handler answers 401
}

var truthEpoch = time.Unix(1_700_000_000, 0)

// replay sends reqs, in order, to a fresh target and returns what each response said.
func replay(t *testing.T, target truthTarget, reqs []arrival) []told {
	t.Helper()
	var mu sync.Mutex
	now := truthEpoch
	h := target(t, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	out := make([]told, len(reqs))
	for i, q := range reqs {
		mu.Lock()
		now = truthEpoch.Add(q.at)
		mu.Unlock()
		r := httptest.NewRequest("GET", "/a", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		if q.cost > 1 {
			r.Header.Set("X-Cost", strconv.Itoa(q.cost))
		}
		if q.fail {
			r.Header.Set("X-Fail", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		out[i] = parseTold(t, w)
	}
	return out
}

func costHeader(r core.Request) int {
	n, _ := strconv.Atoi(r.Header("X-Cost"))
	return max(n, 1)
}

func inMemory(policy string, opts ...core.Option) truthTarget {
	return func(t *testing.T, clock func() time.Time) http.Handler {
		return truthRoute(t, policy, core.NewMemoryStore(&core.MemoryConfig{Now: clock}), opts)
	}
}

// truthRoute is GET /a limited by policy on store, charged by costHeader, answering 401
// to requests that ask for it.
func truthRoute(t *testing.T, policy string, store core.Store, opts []core.Option) http.Handler {
	mw, err := nethttp.New(policy, append([]core.Option{core.WithStore(store), core.WithCost(costHeader)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /a", mw(http.HandlerFunc(failHandler)))
	return mux
}

func failHandler(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Fail") != "" {
		w.WriteHeader(401)
	}
}

// truthRedis is the Redis client of the running test, which startTruthRedis set.
var truthRedis *redis.Client

// startTruthRedis starts a redis-server for the test, stopped when it ends.
func startTruthRedis(t *testing.T) {
	redistest.Require(t)
	srv, err := redistest.StartServer(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	truthRedis = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { truthRedis.Close() })
}

var truthPrefix atomic.Int64

func onRedis(policy string, opts ...core.Option) truthTarget {
	return onRedisWith(policy, false, opts...)
}

func onRedisWith(policy string, deny bool, opts ...core.Option) truthTarget {
	return func(t *testing.T, clock func() time.Time) http.Handler {
		st := redisstore.New(truthRedis, redisstore.WithTimeout(redistest.Timeout), redisstore.WithClock(clock), redisstore.WithDenyCache(deny),
			redisstore.WithPrefix(fmt.Sprintf("truth%d:", truthPrefix.Add(1))))
		return truthRoute(t, policy, st, opts)
	}
}

// arrivals makes n seeded arrivals over a few periods of T: steady pacing, bursts after
// idle gaps, and floods, with nanosecond jitter.
func arrivals(rng *rand.Rand, n int, T time.Duration, costMax int) []arrival {
	var out []arrival
	at := time.Duration(0)
	for len(out) < n {
		switch rng.Intn(4) {
		case 0: // steady
			step := T / time.Duration(2+rng.Intn(20))
			for range 1 + rng.Intn(10) {
				at += step + time.Duration(rng.Int63n(int64(step)/4+1))
				out = append(out, arrival{at: at, cost: 1 + rng.Intn(costMax)})
			}
		case 1: // burst after a gap
			at += time.Duration(rng.Int63n(int64(T)))
			for range 1 + rng.Intn(8) {
				out = append(out, arrival{at: at, cost: 1 + rng.Intn(costMax)})
			}
		case 2: // flood
			for range 1 + rng.Intn(5) {
				at += time.Duration(rng.Int63n(int64(T)/50 + 1))
				out = append(out, arrival{at: at, cost: 1 + rng.Intn(costMax)})
			}
		default: // an odd, non-round gap
			at += time.Duration(rng.Int63n(int64(T)/3+1)) + time.Duration(rng.Int63n(1e9))
			out = append(out, arrival{at: at, cost: 1 + rng.Intn(costMax)})
		}
	}
	for i := range out {
		out[i].fail = rng.Intn(2) == 0
	}
	return out[:n]
}

type truthShape struct {
	name   string
	target truthTarget
	T      time.Duration // the tightest rate's period, for arrivals
	count  int           // q of the (single) rate, 0 for several rates
	exactT bool          // t is exact: r grows right at t (exact log, one rate, whole-unit-free)
	cost   int           // largest cost
	n      int
}

func truthShapes() []truthShape {
	s := []truthShape{
		{"exact-3/1m", inMemory("3/1m"), time.Minute, 3, true, 1, 60},
		{"exact-5/7s", inMemory("5/7s"), 7 * time.Second, 5, true, 1, 60},
		{"several-5/1s,20/1m", inMemory("5/1s,20/1m"), time.Second, 0, false, 1, 120},
		{"mixed-3/2s,300/1m", inMemory("3/2s,300/1m"), 2 * time.Second, 0, false, 1, 80},
		{"bounded-300/1m", inMemory("300/1m"), time.Minute / 100, 300, false, 1, 400},
		{"sub-second-20/50ms", inMemory("20/50ms", core.WithShortPeriods()), 50 * time.Millisecond, 20, false, 1, 80},
		{"cost-5/10s", inMemory("5/10s"), 10 * time.Second, 5, false, 5, 60},
		{"cost-several-4/1s,10/1m", inMemory("4/1s,10/1m"), time.Second, 0, false, 4, 80},
		{"cost-bounded-300/10s", inMemory("300/10s"), 10 * time.Second / 100, 300, false, 300, 200},
		{"huge-1e9/1h", inMemory("1000000000/1h"), time.Hour / 100, 1000000000, false, 1, 30},
		{"countwhen-3/1m", inMemory("3/1m", core.WithCountWhen(core.Failed)), time.Minute, 3, true, 1, 60},
		{"countwhen-several-3/1s,6/1m", inMemory("3/1s,6/1m", core.WithCountWhen(core.Failed)), time.Second, 0, false, 1, 100},
		{"countwhen-bounded-300/10s", inMemory("300/10s", core.WithCountWhen(core.Failed)), 10 * time.Second / 100, 300, false, 1, 700},
		{"countwhen-cost-6/1m", inMemory("6/1m", core.WithCountWhen(core.Failed)), time.Minute, 6, false, 6, 60},
		{"penalty-3/10s", inMemory("3/10s", core.WithPenalty()), 10 * time.Second, 3, false, 1, 60},
	}
	// On Redis.
	s = append(s,
		truthShape{"redis-exact-3/1m", onRedis("3/1m"), time.Minute, 3, true, 1, 50},
		truthShape{"redis-several-5/1s,20/1m", onRedis("5/1s,20/1m"), time.Second, 0, false, 1, 80},
		truthShape{"redis-mixed-3/2s,300/1m", onRedis("3/2s,300/1m"), 2 * time.Second, 0, false, 1, 60},
		truthShape{"redis-cost-5/10s", onRedis("5/10s"), 10 * time.Second, 5, false, 5, 50},
		truthShape{"redis-cost-bounded-300/10s", onRedis("300/10s"), 10 * time.Second / 100, 300, false, 300, 150},
		truthShape{"redis-penalty-3/10s", onRedis("3/10s", core.WithPenalty()), 10 * time.Second, 3, false, 1, 50},
		truthShape{"redis-deny-3/1m", onRedisWith("3/1m", true), time.Minute, 3, true, 1, 50},
		truthShape{"redis-deny-several-5/1s,20/1m", onRedisWith("5/1s,20/1m", true), time.Second, 0, false, 1, 80},
		truthShape{"redis-sub-second-20/50ms", onRedis("20/50ms", core.WithShortPeriods()), 50 * time.Millisecond, 20, false, 1, 80},
		truthShape{"redis-countwhen-3/1m", onRedis("3/1m", core.WithCountWhen(core.Failed)), time.Minute, 3, true, 1, 60},
		truthShape{"redis-countwhen-several-3/1s,6/1m", onRedis("3/1s,6/1m", core.WithCountWhen(core.Failed)), time.Second, 0, false, 1, 100},
		truthShape{"redis-bounded-300/1m", onRedis("300/1m"), time.Minute / 100, 300, false, 1, 400},
	)
	return s
}

// What each response tells its client must hold against the store's truth, probed by
// replaying the arrivals so far on a fresh store and then acting as the client was told:
//   - a refusal's Retry-After s is at least 1, t equals it (cost 1), and a request s seconds
//     later is admitted;
//   - r=k: k requests sent at once are all admitted, and r is never negative;
//   - within t-1 seconds no more than r more fit; for an exact single rate, r+1 fit at t.
func TestFieldsTellTheTruth(t *testing.T) {
	startTruthRedis(t)
	for _, sh := range truthShapes() {
		t.Run(sh.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(sh.name)) * 7919))
			reqs := arrivals(rng, sh.n, sh.T, sh.cost)
			got := replay(t, sh.target, reqs)
			probes := 0
			fails := 0
			fail := func(format string, args ...any) {
				fails++
				if fails <= 6 {
					t.Errorf(format, args...)
				}
			}
			idx := rng.Perm(len(reqs))
			if len(idx) > 50 {
				idx = idx[:50]
			}
			slices.Sort(idx)
			for _, i := range idx {
				g := got[i]
				prefix := reqs[:i+1]
				at := reqs[i].at
				if g.raw == "" {
					fail("request %d: no RateLimit field", i)
					continue
				}
				if g.r < 0 || g.t < 0 || (sh.count > 0 && g.r > sh.count) {
					fail("request %d: RateLimit %q out of range", i, g.raw)
				}
				if g.code == 429 {
					if g.ra < 1 {
						fail("request %d: refusal with Retry-After %d", i, g.ra)
						continue
					}
					if g.t != g.ra && reqs[i].cost == 1 {
						fail("request %d: refusal of cost 1: RateLimit %q, Retry-After %d", i, g.raw, g.ra)
					}
					probe := append(slices.Clone(prefix), arrival{at: at + time.Duration(g.ra)*time.Second, cost: reqs[i].cost})
					if res := replay(t, sh.target, probe); res[len(res)-1].code == 429 {
						fail("request %d at %v: refused with Retry-After %d (RateLimit %q); the retry at %v is refused too (Retry-After %d, RateLimit %q)",
							i, at, g.ra, g.raw, probe[len(probe)-1].at, res[len(res)-1].ra, res[len(res)-1].raw)
					}
					probes++
				}
				if g.r > 0 && g.r <= 1000 {
					probe := slices.Clone(prefix)
					for range g.r {
						probe = append(probe, arrival{at: at, cost: 1, fail: true})
					}
					res := replay(t, sh.target, probe)
					admitted := 0
					for _, x := range res[i+1:] {
						if x.code != 429 {
							admitted++
						}
					}
					if admitted != g.r {
						fail("request %d at %v: RateLimit %q, then %d of %d sent at once admitted", i, at, g.raw, admitted, g.r)
					}
					probes++
				}
				// Under WithCountWhen an admitted request that did not count gave its slot back
				// after its fields were written (documented): its t says nothing then.
				givenBack := strings.Contains(sh.name, "countwhen") && g.code == 200 && !reqs[i].fail
				if g.t >= 2 && g.r < 1000 && !givenBack {
					probe := slices.Clone(prefix)
					burst := g.r + 1
					for range burst {
						probe = append(probe, arrival{at: at + time.Duration(g.t-1)*time.Second, cost: 1, fail: true})
					}
					res := replay(t, sh.target, probe)
					admitted := 0
					for _, x := range res[i+1:] {
						if x.code != 429 {
							admitted++
						}
					}
					if admitted > g.r {
						fail("request %d at %v: RateLimit %q, yet %d fit %ds later", i, at, g.raw, admitted, g.t-1)
					}
					probes++
				}
				if sh.exactT && g.t >= 1 && g.r < sh.count && !givenBack {
					probe := slices.Clone(prefix)
					for range g.r + 1 {
						probe = append(probe, arrival{at: at + time.Duration(g.t)*time.Second, cost: 1, fail: true})
					}
					res := replay(t, sh.target, probe)
					admitted := 0
					for _, x := range res[i+1:] {
						if x.code != 429 {
							admitted++
						}
					}
					if admitted < g.r+1 {
						fail("request %d at %v: RateLimit %q, yet only %d fit %ds later", i, at, g.raw, admitted, g.t)
					}
				}
			}
			refused := 0
			for _, g := range got {
				if g.code == 429 {
					refused++
				}
			}
			if fails > 0 || testing.Verbose() {
				t.Logf("%d failures in %d probes; %d of %d refused", fails, probes, refused, len(got))
			}
		})
	}
}

// truthTargets is policy in memory and on Redis.
func truthTargets(t *testing.T, policy string) map[string]truthTarget {
	startTruthRedis(t)
	return map[string]truthTarget{"memory": inMemory(policy), "redis": onRedis(policy)}
}

// admittedAt returns how many of n requests of cost 1 sent at once at at, after prefix,
// are admitted.
func admittedAt(t *testing.T, target truthTarget, prefix []arrival, at time.Duration, n int) int {
	t.Helper()
	probe := slices.Clone(prefix)
	for range n {
		probe = append(probe, arrival{at: at, cost: 1})
	}
	admitted := 0
	for _, x := range replay(t, target, probe)[len(prefix):] {
		if x.code != 429 {
			admitted++
		}
	}
	return admitted
}

// A refusal of cost > 1 on a bounded rate (above 256 a period) reports t as the exact form
// does: until the oldest grant the rate counts leaves its window, within which at most r
// more fit; Retry-After alone waits for enough grants to leave. t was Retry-After.
func TestBoundedCostRefusalReportsTheOldestGrant(t *testing.T) {
	// The grant at 0 leaves at 10s, the one at 5s at 15s; a bounded rate counts them in
	// buckets of a hundredth of the period, which leave at their end.
	for _, c := range []struct {
		policy string
		big    int
		ra, t  int
	}{{"10/10s", 8, 9, 4}, {"300/10s", 298, 10, 5}} {
		for name, target := range truthTargets(t, c.policy) {
			t.Run(c.policy+"/"+name, func(t *testing.T) {
				reqs := []arrival{{at: 0, cost: 1}, {at: 5 * time.Second, cost: c.big}, {at: 6 * time.Second, cost: 5}}
				g := replay(t, target, reqs)[2]
				if g.code != 429 || g.ra != c.ra || g.r != 1 || g.t != c.t {
					t.Fatalf("cost-5 request at 6s: %d, Retry-After %d, RateLimit %q; want 429, %d, r=1;t=%d", g.code, g.ra, g.raw, c.ra, c.t)
				}
				if n := admittedAt(t, target, reqs, 6*time.Second+time.Duration(g.t)*time.Second, g.r+5); n <= g.r {
					t.Errorf("RateLimit %q: only %d requests fit %ds later", g.raw, n, g.t)
				}
			})
		}
	}
}

// A refusal of cost > 1 under several rates reports the rate with the fewest left, so that
// r names no room another rate lacks: "4/1s,10/1m" with the second full and the minute
// holding 2, a cost-3 request is refused for the minute (Retry-After), and told r=0.
func TestSeveralRatesCostRefusalReportsTheFewestLeft(t *testing.T) {
	for name, target := range truthTargets(t, "4/1s,10/1m") {
		t.Run(name, func(t *testing.T) {
			reqs := []arrival{{at: 0, cost: 4}, {at: 2 * time.Second, cost: 4}, {at: 2500 * time.Millisecond, cost: 3}}
			g := replay(t, target, reqs)[2]
			if g.code != 429 || g.r != 0 || g.ra != 58 {
				t.Fatalf("cost-3 request: %d, Retry-After %d, RateLimit %q; want 429, 58 (the minute), r=0", g.code, g.ra, g.raw)
			}
			if n := admittedAt(t, target, reqs, 2500*time.Millisecond, 1); n != 0 {
				t.Errorf("refusal says RateLimit %q, yet a request sent at once is admitted", g.raw)
			}
		})
	}
}
