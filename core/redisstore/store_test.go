package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/bounds"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

var prefixSeq atomic.Int64

// freshPrefix keeps each harness's keys apart on the shared servers.
func freshPrefix(t *testing.T) string {
	return fmt.Sprintf("test%d-%d:", time.Now().UnixNano(), prefixSeq.Add(1))
}

func TestConformance(t *testing.T) {
	needRedis(t)
	clients := map[string]func(t *testing.T) redis.UniversalClient{
		"Standalone": func(t *testing.T) redis.UniversalClient { return newClient(t, standalone) },
		"Cluster":    func(t *testing.T) redis.UniversalClient { return newClusterClient(t) },
	}
	for name, newC := range clients {
		t.Run(name, func(t *testing.T) {
			t.Run("ServerTime", func(t *testing.T) {
				t.Parallel()
				storetest.Run(t, func(t *testing.T) storetest.Harness {
					s := redisstore.New(newC(t), roomy, redisstore.WithPrefix(freshPrefix(t)))
					return storetest.Harness{Store: s}
				})
			})
			t.Run("VirtualClock", func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) storetest.Harness {
					clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
					s := redisstore.New(newC(t), roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithClock(clock.Now))
					return storetest.Harness{Store: s, Advance: func(d time.Duration) { clock.Advance(d) }}
				})
			})
		})
	}
}

// TestMatchesEngine runs random sequences through the script and through core's engine
// side by side, on one virtual clock, and wants the same decision to the microsecond.
func TestMatchesEngine(t *testing.T) {
	needRedis(t)
	policies := []string{"3/1s", "1/100ms", "5/100ms,10/1s", "1000/1s", "300/200ms", "100000/1m", "2/50ms,1000/1s,20/2s", "300/1s,256/500ms", "256/1s", "1000/1s,500/100ms,3/10ms", "4/100ms,4/1s", "3/100ms,4/100ms", "300/100ms,301/100ms", "500/2s,2000/10s", "300/100ms,1000/1s,20000/1m", "5/100ms,10/1s,3/50ms"}
	// On a grid, every step is a whole number of tenths of the shortest period, so grants
	// land exactly on window edges (an entry exactly T old has left the window), which
	// random microseconds almost never do.
	// In bursts, most steps take no time, so that large counts fill and refuse too.
	variants := []struct{ deny, grid, burst bool }{{false, false, false}, {true, false, false}, {false, true, false}, {false, false, true}}
	for _, variant := range variants {
		deny, grid, burst := variant.deny, variant.grid, variant.burst
		for _, text := range policies {
			p := mustParse(text)
			t.Run(fmt.Sprintf("%s/deny=%v/grid=%v/burst=%v", text, deny, grid, burst), func(t *testing.T) {
				rates := p.Rates()
				minCount, shortest := rates[0].Count, rates[0].Period
				bounded := false
				for _, r := range rates {
					minCount = min(minCount, r.Count)
					shortest = min(shortest, r.Period)
					bounded = bounded || !exact(r)
				}
				rng := rand.New(rand.NewPCG(uint64(len(text)), 7))
				start := time.Unix(1_700_000_000, 0)
				clock := storetest.NewManualClock(start)
				store := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)),
					redisstore.WithClock(clock.Now), redisstore.WithDenyCache(deny))
				eng := newEngine(clock)
				// Grants admitted in Enforce mode, some given back later (as a limit
				// counting by outcome does), often after later grants: the engine's
				// name for each and the store's.
				type grant struct {
					key           string
					engine, redis int64
					cost          int
				}
				var grants []grant
				released := 0
				for step := range 1500 {
					if len(grants) > 0 && rng.IntN(6) == 0 {
						i := rng.IntN(len(grants))
						g := grants[i]
						grants = append(grants[:i], grants[i+1:]...)
						if err := eng.Release(context.Background(), core.Query{Policy: p, Key: g.key, Cost: g.cost}, g.engine); err != nil {
							t.Fatalf("step %d: the engine's Release: %v", step, err)
						}
						if err := store.Release(context.Background(), core.Query{Policy: p, Key: g.key, Cost: g.cost}, g.redis); err != nil {
							t.Fatalf("step %d: Release: %v", step, err)
						}
						released++
					}
					// Mostly small steps, some zero, some past every window.
					var adv time.Duration
					switch rng.IntN(10) {
					case 0:
					case 1:
						adv = time.Duration(rng.IntN(3000)) * time.Millisecond
					case 2:
						// Now and then backwards (a clock stepping back), which every side
						// must clamp alike. Not with the deny cache: its clock is the
						// process's monotonic one, which never steps back.
						if !deny {
							adv = -time.Duration(rng.IntN(int(longest(p)/time.Microsecond)/20+1)) * time.Microsecond
						}
					default:
						adv = time.Duration(rng.IntN(int(longest(p)/time.Microsecond)/40+1)) * time.Microsecond
					}
					if unit := shortest / 10; grid {
						adv = adv / unit * unit
					}
					if burst && rng.IntN(20) != 0 {
						adv = 0
					}
					now := clock.Advance(adv)
					key := "a"
					if rng.IntN(4) == 0 {
						key = "b"
					}
					cost, mode := randomAsk(rng, 4, 0, min(minCount, 4), 10) // cost 0 counts as 1
					q := core.Query{Policy: p, Key: key, Cost: cost, Mode: mode}
					want, err := eng.Decide(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					got, err := store.Decide(context.Background(), q)
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					if got.Allowed && mode == core.Enforce {
						// Both record at now, or at the key's newest grant if the clock
						// stepped back behind it: the same instant, in their own units.
						if want.Allowed && got.Grant*1000 != want.Grant {
							t.Fatalf("step %d: the store's grant is at %d µs, the engine's at %d ns", step, got.Grant, want.Grant)
						}
						grants = append(grants, grant{key, want.Grant, got.Grant, max(cost, 1)})
					}
					got.Grant, want.Grant = 0, 0 // nanoseconds against microseconds; each side keeps its own
					same := got == want
					if deny {
						// The deny cache is exact on what it promises: the refusal, and for
						// exact rates its wait. (With a bounded rate, the engine's RetryAfter
						// can exceed the true wait, so an aged cached value may differ.)
						same = got.Allowed == want.Allowed && (bounded || got.RetryAfter == want.RetryAfter)
					}
					if !same {
						t.Fatalf("step %d (t+%v, key %s, cost %d, %v):\n got %+v\nwant %+v", step, now.Sub(start), key, cost, mode, got, want)
					}
				}
				if released == 0 {
					t.Fatal("no grant was given back: the releases went untested")
				}
			})
		}
	}
}

func TestCostTooHighWithoutRoundTrip(t *testing.T) {
	// No server at this address: the cost check must fail before any round trip.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	s := redisstore.New(c, roomy)
	_, err := s.Decide(context.Background(), core.Query{Policy: mustParse("3/1m,10/1h"), Key: "k", Cost: 4})
	if !errors.Is(err, core.ErrCostTooHigh) {
		t.Fatalf("err %v, want ErrCostTooHigh", err)
	}
	if _, err := s.Decide(context.Background(), core.Query{Key: "k"}); err == nil {
		t.Fatal("nil policy: want an error")
	}
}

func TestKeyLayout(t *testing.T) {
	needRedis(t)
	c := newClusterClient(t)
	ctx := context.Background()
	fresh := freshPrefix(t)
	s := redisstore.New(c, roomy, redisstore.WithPrefix(fresh+"app{x}:"))
	p := mustParse("1/1h")
	masters := map[string]bool{}
	slots := map[int64]bool{}
	for i := range 60 {
		k := strconv.Itoa(i)
		switch i % 6 {
		case 1:
			k = "{" + k
		case 2:
			k += "}"
		case 3:
			k = "{" + k + "}"
		case 4:
			k = "ключ 🔑 " + k
		case 5:
			k = strings.Repeat("{z}", 3500) + k
		}
		key := s.Key(p, "GET /u/{id}", k)
		if !strings.HasPrefix(key, fresh+"appx:{") || len(key) != len(fresh+"appx:")+34 {
			t.Fatalf("key %q: want prefix appx: (braces removed) and a bounded length", key)
		}
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		tag := key[strings.IndexByte(key, '{'):]
		if tagSlot, _ := c.ClusterKeySlot(ctx, tag).Result(); tagSlot != slot {
			t.Fatalf("key %q routes to slot %d, its hash tag %q to %d", key, slot, tag, tagSlot)
		}
		slots[slot] = true
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		q := core.Query{Policy: p, Scope: "GET /u/{id}", Key: k}
		if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
			t.Fatalf("key %.30q: first decision %+v, %v", k, d, err)
		}
		if d, err := s.Decide(ctx, q); err != nil || d.Allowed {
			t.Fatalf("key %.30q: second decision %+v, %v: want refused", k, d, err)
		}
	}
	if len(slots) < 50 || len(masters) != len(cluster) {
		t.Fatalf("60 keys fell in %d slots on %d of %d masters: the layout does not spread", len(slots), len(masters), len(cluster))
	}
	// The same bucket gets the same key in every process: no per-process seed.
	if got, want := redisstore.New(c, roomy).Key(p, "", "k"), redisstore.New(c, roomy).Key(mustParse("1/60m"), "", "k"); got != want {
		t.Fatalf("equal policies, different keys: %s, %s", got, want)
	}
}

func TestScriptFlush(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	own := ownServer(t)
	cc := newClusterClient(t)
	cases := map[string]struct {
		client redis.UniversalClient
		flush  func() error
	}{
		"Standalone": {newClient(t, own), func() error { return newClient(t, own).ScriptFlush(ctx).Err() }},
		"Cluster": {cc, func() error {
			return cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := redisstore.New(c.client, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
			p := mustParse("3/1h")
			for i := range 8 {
				key := "k" + strconv.Itoa(i)
				for j := range 4 {
					if j == 2 {
						if err := c.flush(); err != nil {
							t.Fatal(err)
						}
					}
					d, err := s.Decide(ctx, core.Query{Policy: p, Key: key})
					if err != nil {
						t.Fatalf("key %s, request %d, after SCRIPT FLUSH: %v", key, j+1, err)
					}
					if d.Allowed != (j < 3) {
						t.Fatalf("key %s, request %d: %+v, the state did not survive the flush", key, j+1, d)
					}
				}
			}
		})
	}
}

// Reset and Release run under the store's deadline (WithTimeout), as decisions do: "a paused
// or unreachable server costs at most the deadline". Reset (what Quota.Reset calls, from a
// request handler such as a password reset) sent its script straight through the client
// with only the caller's context, so on a paused server it waited for go-redis's own read
// timeout (3 s) and its retries, or forever with ContextTimeoutEnabled and a context
// without a deadline.
func TestResetAndReleaseKeepTheStoresDeadline(t *testing.T) {
	needRedis(t)
	for _, kind := range []string{"plain client", "ContextTimeoutEnabled"} {
		t.Run(kind, func(t *testing.T) {
			srv := ownServer(t)
			var c *redis.Client
			if kind == "plain client" {
				c = newClient(t, srv)
			} else {
				c = newCtxClient(t, srv)
			}
			s := redisstore.New(c, redisstore.WithTimeout(100*time.Millisecond))
			ctx := context.Background()
			q := core.Query{Policy: mustParse("3/1m"), Scope: "login", Key: "alice"}
			if _, err := s.Decide(ctx, q); err != nil {
				t.Fatal(err)
			}
			signal(t, srv, syscall.SIGSTOP)
			defer signal(t, srv, syscall.SIGCONT)
			for name, call := range map[string]func() error{
				"Release": func() error { return s.Release(ctx, q, 1) },
				"Reset":   func() error { return s.Reset(ctx, q) },
			} {
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- call() }()
				select {
				case err := <-done:
					if took := time.Since(start); took > time.Second || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("%s on a paused server returned after %v (%v), want the store's 100ms deadline", name, took.Round(time.Millisecond), err)
					}
				case <-time.After(2 * time.Second):
					t.Fatalf("%s on a paused server has not returned after 2s; the store's deadline is 100ms", name)
				}
			}
		})
	}
}

// A restart forgets the grants Redis had not persisted (docs/redis.md, "Persistence and
// restarts"): without persistence, all of them, and every client gets its whole quota again
// at once; with the append-only file flushed before each reply (appendfsync always), a
// killed server keeps them. (Under everysec Redis may hold its writes back while a flush
// is slow, and a kill then loses them.) 3 grants of 3/1m, a kill and a restart, then 3
// more requests within the minute.
func TestRestartKeepsOnlyPersistedGrants(t *testing.T) {
	needRedis(t)
	for _, c := range []struct {
		name  string
		extra []string
		want  int // admitted in all
	}{
		{"no persistence", nil, 6},
		{"appendonly always", []string{"--appendonly", "yes", "--appendfsync", "always"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			own, err := redistest.StartServer(tmpRoot, false, c.extra...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(own.Stop)
			s := redisstore.New(newClient(t, own), roomy)
			q := core.Query{Policy: mustParse("3/1m"), Scope: "login", Key: "alice"}
			start := time.Now()
			admitted := 0
			decide := func() {
				t.Helper()
				for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					d, err := s.Decide(ctx, q)
					if err == nil {
						if d.Allowed {
							admitted++
						}
						return
					}
					if time.Now().After(end) {
						t.Fatal(err)
					}
				}
			}
			for range 3 {
				decide()
			}
			own.Stop()
			if err := own.Start(); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				decide()
			}
			if el := time.Since(start); el < time.Minute && admitted != c.want {
				t.Fatalf("3/1m: %d admitted within %v across a restart of Redis, want %d", admitted, el.Round(time.Millisecond), c.want)
			}
		})
	}
}

// TestServerDown stops and pauses the server under a store: every call must fail within the
// deadline, and decisions must resume on the same store once the server is back.
func TestServerDown(t *testing.T) {
	needRedis(t)
	own := ownServer(t)
	ctx := context.Background()
	p := mustParse("100/1h")
	q := core.Query{Policy: p, Key: "k"}
	const timeout = 100 * time.Millisecond
	clients := map[string]*redis.Client{
		"DefaultClient":         newClient(t, own),
		"ContextTimeoutEnabled": redis.NewClient(&redis.Options{Addr: own.Addr(), ContextTimeoutEnabled: true}),
	}
	t.Cleanup(func() { clients["ContextTimeoutEnabled"].Close() })
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			s := redisstore.New(c, redisstore.WithTimeout(timeout))
			failFast := func(what string) {
				t.Helper()
				for i := range 5 {
					withinDeadline(t, fmt.Sprintf("%s, call %d", what, i+1), timeout, 150*time.Millisecond, func() error {
						_, err := s.Decide(ctx, q)
						if err == nil {
							t.Fatalf("%s: decided", what)
						} else if !strings.Contains(err.Error(), s.Key(p, "", "k")) {
							t.Fatalf("%s: error %q does not name the key", what, err)
						}
						return err
					})
				}
			}
			warmUp(t, s, q)
			signal(t, own, syscall.SIGSTOP)
			failFast("server paused")
			signal(t, own, syscall.SIGCONT)
			own.Stop()
			failFast("server stopped")
			if err := own.Start(); err != nil {
				t.Fatal(err)
			}
			// Peek, which records nothing: a decision that timed out on a loaded machine
			// after Redis had run it would have left a grant behind, and the count one off.
			pq := q
			pq.Mode = core.Peek
			deadline := time.Now().Add(5 * time.Second)
			for {
				d, err := s.Decide(ctx, pq)
				if err == nil {
					// A restart without persistence lost the state: the warm-up's grants.
					if !d.Allowed || d.Remaining != 100 {
						t.Fatalf("after restart: %+v, want the whole quota", d)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("decisions did not resume after the restart: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// commands returns how many times the server ran the script (EVALSHA plus EVAL).
func commands(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				n += v
			}
		}
	}
	return n
}

func TestDenyCache(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	c := newClient(t, ownServer(t))
	p := mustParse("5/1m")
	const flood = 2000
	// Every script: one exact rate, several, one bounded, several, and the generic one.
	for _, text := range []string{"5/1m", "5/1m,10/1h", "300/1m", "300/1m,1000/1h", "5/1m,300/1h"} {
		q := core.Query{Policy: mustParse(text), Key: "flood"}
		limit := q.Policy.Rates()[0].Count
		calls := map[bool]int64{}
		for _, on := range []bool{false, true} {
			s := redisstore.New(c, roomy, redisstore.WithPrefix(fmt.Sprintf("%sdeny-%v:", freshPrefix(t), on)), redisstore.WithDenyCache(on))
			for range limit {
				if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
					t.Fatalf("%s, filling: %+v %v", text, d, err)
				}
			}
			before := commands(t, c)
			var prev time.Duration = time.Hour
			for i := range flood {
				d, err := s.Decide(ctx, q)
				if err != nil || d.Allowed || d.Remaining != 0 || d.Rate.Count != limit {
					t.Fatalf("%s, flood %d: %+v %v, want refused", text, i, d, err)
				}
				if d.RetryAfter > prev || d.RetryAfter <= 0 {
					t.Fatalf("%s, flood %d: RetryAfter %v after %v: must count down", text, i, d.RetryAfter, prev)
				}
				prev = d.RetryAfter
			}
			calls[on] = commands(t, c) - before
			t.Logf("%s, deny cache %v: %d script calls for %d refused decisions", text, on, calls[on], flood)
		}
		if calls[false] < flood || calls[true]*10 > calls[false] {
			t.Fatalf("%s, script calls: %d without the cache, %d with: want at least 10x fewer", text, calls[false], calls[true])
		}
	}

	// Penalty queries are never answered locally: each refusal must be recorded.
	s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)+"deny-penalty:"))
	pq := core.Query{Policy: p, Key: "k", Mode: core.Penalty}
	for range 5 {
		s.Decide(ctx, pq)
	}
	before := commands(t, c)
	for range 10 {
		if d, err := s.Decide(ctx, pq); err != nil || d.Allowed {
			t.Fatalf("penalty: %+v %v", d, err)
		}
	}
	if n := commands(t, c) - before; n != 10 {
		t.Fatalf("10 penalty refusals ran the script %d times, want 10", n)
	}
}

func TestDenyCacheReleases(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	s := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)))
	const T = 150 * time.Millisecond
	p := mustPolicy(core.Rate{Count: 1, Period: T})
	for attempt := 1; ; attempt++ {
		q := core.Query{Policy: p, Key: "k" + strconv.Itoa(attempt)}
		start := time.Now()
		if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
			t.Fatalf("first: %+v %v", d, err)
		}
		d, err := s.Decide(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el >= T {
			// The first grant may have left the window: the second answer says nothing.
			if attempt == 3 {
				t.Fatalf("two decisions took %v or more in each of %d attempts, the window is %v", el, attempt, T)
			}
			t.Logf("two decisions took %v, the window is %v; again", el, T)
			continue
		}
		if d.Allowed {
			t.Fatalf("second, within %v of the first: %+v, want refused", T, d)
		}
		// From the reply, RetryAfter is at least as long as from the server's decision.
		time.Sleep(d.RetryAfter + time.Millisecond)
		if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
			t.Fatalf("after RetryAfter the cache must let the request through to Redis: %+v %v", d, err)
		}
		return
	}
}

// A Reset reaches Redis and the deny cache of the process that calls it, not another
// process's deny cache (docs/redis.md, "The deny cache"; core.Quota.Reset): a process that
// cached a refusal keeps refusing the key locally for the rest of its wait, while a
// process without the cache (WithDenyCache(false), the documented way out) admits at once.
func TestResetDoesNotReachAnotherProcessesDenyCache(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	prefix := freshPrefix(t)
	cached := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix))
	uncached := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix), redisstore.WithDenyCache(false))
	operator := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix))
	q := core.Query{Policy: mustParse("5/15m"), Scope: "login", Key: "alice"}
	for i := range 6 {
		d, err := cached.Decide(ctx, q)
		if err != nil || d.Allowed != (i < 5) {
			t.Fatalf("request %d: %+v %v", i+1, d, err)
		}
	}
	if err := operator.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	peek := q
	peek.Mode = core.Peek
	if d, err := cached.Decide(ctx, peek); err != nil || d.Allowed || d.RetryAfter < time.Minute {
		t.Fatalf("the process that cached the refusal, after another's reset: %+v %v, want its cached refusal (documented)", d, err)
	}
	if d, err := uncached.Decide(ctx, q); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("a process without the deny cache, after the reset: %+v %v, want admitted with 4 left", d, err)
	}
}

func TestMemoryUsage(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	// A server of its own, so that the keys can have the default prefix, as deployed: the
	// key's name is part of what MEMORY USAGE counts.
	c := newClient(t, ownServer(t))
	for _, tc := range []struct {
		policy string
		max    int64
	}{{"100/1m", 1000}, {"3/1m", 200}} {
		s := redisstore.New(c, roomy, redisstore.WithDenyCache(false))
		p := mustParse(tc.policy)
		q := core.Query{Policy: p, Key: "192.0.2.77", Scope: "GET /user/{id}"}
		// The expiry has run down since the last grant's call began, no longer.
		var since time.Time
		for range p.Rates()[0].Count {
			since = time.Now()
			if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
				t.Fatalf("%s: %+v %v", tc.policy, d, err)
			}
		}
		key := s.Key(p, q.Scope, q.Key)
		n, err := c.MemoryUsage(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s after %d grants: MEMORY USAGE %d bytes", tc.policy, p.Rates()[0].Count, n)
		if n > tc.max {
			t.Errorf("%s: MEMORY USAGE %d bytes, want at most %d", tc.policy, n, tc.max)
		}
		// Expiry is cleanup only: at least the window after the newest grant, at most
		// twice that (it is renewed only when less than one window is left).
		ttl, err := c.PTTL(ctx, key).Result()
		if lo := time.Minute - time.Since(since) - time.Millisecond; err != nil || ttl < lo || ttl > 2*time.Minute+4*time.Millisecond {
			t.Errorf("%s: PTTL %v (%v), want between %v and 2m", tc.policy, ttl, err, lo)
		}
	}
}

// TestExpiryOutlivesGrants checks the rule that lets the lean scripts skip most expiry writes:
// after every grant the key lives at least one window more, and at most two. Decisions
// come at uneven gaps, so that some find the expiry still far off and some find it near.
func TestExpiryOutlivesGrants(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	c := newClient(t, standalone)
	// Every script; T is each policy's longest period, which the key must outlive.
	for _, policy := range []string{"2/100ms", "5/100ms", "300/100ms", "2/100ms,3/50ms", "300/100ms,500/50ms", "2/100ms,300/50ms"} {
		s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
		p := mustParse(policy)
		q := core.Query{Policy: p, Key: "192.0.2.8"}
		key := s.Key(p, q.Scope, q.Key)
		const T = 100 * time.Millisecond
		renewed, grants := 0, 0
		last := time.Duration(-1)
		for i := range 40 {
			time.Sleep(time.Duration(i%7) * 9 * time.Millisecond)
			start := time.Now()
			d, err := s.Decide(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				continue
			}
			grants++
			// PTTL counts whole milliseconds down from the script's own reading, which was
			// at most the two round trips ago; a bounded rate's window ends with its newest
			// bucket, up to T/100 later.
			lo := T - time.Since(start) - time.Millisecond
			hi := 2*T + T/bounds.Buckets + 2*time.Millisecond
			if ttl < lo || ttl > hi {
				t.Fatalf("%s: after a grant PTTL is %v, want between %v and %v", policy, ttl, lo, hi)
			}
			if ttl > last && last >= 0 {
				renewed++
			}
			last = ttl
		}
		if grants < 10 || renewed < 2 {
			t.Fatalf("%s: %d grants, %d renewals: the test did not exercise renewal", policy, grants, renewed)
		}
		t.Logf("%s: %d grants, expiry renewed %d times", policy, grants, renewed)
	}
}

// TestExpiryAfterServerClockStepBack: when the server's clock steps back (a failover to a
// node whose clock lags), decisions clamp to the key's newest time, ahead of TIME. The
// expiry must still reach the end of every window that counts a grant, or the key vanishes
// early and a full window's worth gets through again. The step is simulated by writing a
// key whose newest time is 200ms ahead of the server's TIME.
func TestExpiryAfterServerClockStepBack(t *testing.T) {
	needRedis(t)
	c := newClient(t, standalone)
	for _, text := range []string{"5/400ms", "300/400ms"} {
		for attempt := 1; ; attempt++ {
			admitted, why := clockStepBack(t, c, mustParse(text))
			if why == "" {
				if admitted {
					t.Errorf("%s: the whole quota admitted while the grants that filled the window still counted: the key expired early", text)
				}
				break
			}
			if attempt == 3 {
				t.Fatalf("%s: in each of %d attempts the machine was too slow for the check: %s", text, attempt, why)
			}
			t.Logf("%s: %s; again", text, why)
		}
	}
}

// clockStepBack plants a key 200ms ahead of the server's clock, makes one grant (clamped to
// it), fills the window 560ms after the start, and at 860ms asks for the whole quota. It
// reports whether that was admitted, or why the answer says nothing: the grant came too
// late to be clamped, or the ask too late for the window's grants to count.
func clockStepBack(t *testing.T, c redis.UniversalClient, p *core.Policy) (admitted bool, void string) {
	ctx := context.Background()
	le := func(b []byte, v int64, n int) []byte {
		return append(b, binary.LittleEndian.AppendUint64(nil, uint64(v))[:n]...)
	}
	s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
	key := s.Key(p, "", "k")
	st, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const ahead = 200 * time.Millisecond
	newest := st.Add(ahead).UnixMicro()
	var v []byte
	if exact(p.Rates()[0]) { // exact.lua: [I2 w][i7 E][I2 b] then the ring
		v = le(le(le(le(nil, 1, 2), 0, 7), 0, 2), newest, 7)
	} else { // bounded.lua: [I2 w][i8 last][i7 E], then [i8 lo][i8 sum][i8 newest] and 101 counts
		g := p.Rates()[0].Period.Microseconds() / bounds.Buckets
		k := newest / g // one grant in the newest bucket
		v = le(le(le(le(le(le(nil, 0, 2), newest, 8), 0, 7), k, 8), 1, 8), k, 8)
		counts := make([]byte, 8*(bounds.Buckets+1))
		counts[8*(k%(bounds.Buckets+1))] = 1
		v = append(v, counts...)
	}
	if err := c.Set(ctx, key, v, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Decide(ctx, core.Query{Policy: p, Key: "k"}) // clamped: renews the expiry
	if err != nil || !d.Allowed {
		t.Fatalf("%s: %+v %v", p, d, err)
	}
	if el := time.Since(st); el >= ahead {
		return false, fmt.Sprintf("the grant ended %v after the start, not clamped to the key's time %v ahead", el, ahead)
	}
	if want := p.Rates()[0].Count - 2; d.Remaining != want {
		// The planted grant was not read: this test's layouts are out of date.
		t.Fatalf("%s: Remaining %d after the planted grant and one more, want %d", p, d.Remaining, want)
	}
	// The server's clock has caught up with the key: fill the window.
	time.Sleep(560*time.Millisecond - time.Since(st))
	filled := time.Now()
	pk, err := s.Decide(ctx, core.Query{Policy: p, Key: "k", Mode: core.Peek})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Decide(ctx, core.Query{Policy: p, Key: "k", Cost: pk.Remaining}); err != nil || !d.Allowed {
		t.Fatalf("%s: filling the window: %+v %v", p, d, err)
	}
	// 300ms later those grants still count: a request for the whole quota must wait.
	time.Sleep(860*time.Millisecond - time.Since(st))
	d, err = s.Decide(ctx, core.Query{Policy: p, Key: "k", Cost: p.Rates()[0].Count})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(filled); el >= p.Rates()[0].Period {
		return false, fmt.Sprintf("the ask ended %v after the window was filled: its grants may have left", el)
	}
	return d.Allowed, ""
}

// TestSameMicrosecondFromTwoClients makes grants from two stores with their own clients,
// as two app servers would, at the same microsecond (a shared virtual clock): each is
// recorded, none overwrites another.
func TestSameMicrosecondFromTwoClients(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	prefix := redisstore.WithPrefix(freshPrefix(t))
	a := redisstore.New(newClient(t, standalone), roomy, prefix, redisstore.WithClock(clock.Now))
	b := redisstore.New(newClient(t, standalone), roomy, prefix, redisstore.WithClock(clock.Now))
	for _, policy := range []string{"4/1s", "1000/1s"} { // an exact ring, a bounded form
		q := core.Query{Policy: mustParse(policy), Key: "k"}
		limit := q.Policy.Rates()[0].Count
		for i := range limit {
			s := a
			if i%2 == 1 {
				s = b
			}
			d, err := s.Decide(ctx, q)
			if err != nil || !d.Allowed || d.Remaining != limit-1-i {
				t.Fatalf("%s, grant %d at one microsecond: %+v %v, want admitted with %d left", policy, i+1, d, err, limit-1-i)
			}
		}
		for _, s := range []*redisstore.Store{a, b} {
			if d, err := s.Decide(ctx, q); err != nil || d.Allowed {
				t.Fatalf("%s: grant %d at the same microsecond: %+v %v, want refused", policy, limit+1, d, err)
			}
		}
	}
}

// TestBoundedRetryAfterPenaltyJump: found in review. A Penalty refusal recorded in a bucket
// more than one past the newest made the bounded script count, in its RetryAfter, a bucket
// dropped in the same call (it shares a slot with a bucket 101 later): RetryAfter came
// out 100 ms where the engine says 101 ms.
func TestBoundedRetryAfterPenaltyJump(t *testing.T) {
	needRedis(t)
	p := mustParse("1000/100ms,5000/1s")
	start := time.Unix(1_700_000_000, 0)
	clock := storetest.NewManualClock(start)
	store := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithClock(clock.Now), redisstore.WithDenyCache(false))
	eng := newEngine(clock)
	for _, s := range []struct {
		at   time.Duration
		cost int
		mode core.Mode
	}{{0, 600, core.Enforce}, {50 * time.Millisecond, 400, core.Enforce}, {102 * time.Millisecond, 700, core.Penalty}} {
		clock.Advance(start.Add(s.at).Sub(clock.Now()))
		q := core.Query{Policy: p, Key: "k", Cost: s.cost, Mode: s.mode}
		want, err := eng.Decide(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.Decide(context.Background(), q)
		if recorded := s.mode == core.Penalty || want.Allowed && s.mode == core.Enforce; recorded && got.Grant*1000 != want.Grant {
			t.Fatalf("t+%v: the store's grant is at %d µs, the engine's at %d ns (%v)", s.at, got.Grant, want.Grant, err)
		}
		got.Grant, want.Grant = 0, 0 // microseconds against nanoseconds
		if err != nil || got != want {
			t.Fatalf("t+%v cost %d %v:\n got %+v (%v)\nwant %+v", s.at, s.cost, s.mode, got, err, want)
		}
	}
}

// TestErrorNamesRefusedConnection decides against a stopped server. go-redis retries a
// refused connection until the deadline and then reports only "context deadline
// exceeded"; the store's error must name the refused connection to the server's address
// (it now ends the call at once: TestRefusedConnectionEndsTheDecisionAtOnce), and still
// match context.DeadlineExceeded when it names the deadline.
func TestErrorNamesRefusedConnection(t *testing.T) {
	needRedis(t)
	own := ownServer(t)
	own.Stop()
	q := core.Query{Policy: mustParse("3/1m"), Key: "k"}
	for name, c := range map[string]*redis.Client{"DefaultClient": newClient(t, own), "ContextTimeoutEnabled": newCtxClient(t, own)} {
		t.Run(name, func(t *testing.T) {
			// The first decision has a second: the refusal must be seen before the deadline
			// even on a stalled machine, and go-redis is still retrying it at the end.
			s := redisstore.New(c, redisstore.WithTimeout(time.Second), redisstore.WithPrefix(freshPrefix(t)))
			// check makes one decision under a caller's timeout. It fails t on an error that
			// does not name the refused connection, or names a deadline that did not
			// apply; it returns why the answer said nothing when the deadline named is at
			// most half of d: the time that was left when the decision started, which a
			// machine stalled for half the timeout after the caller set it leaves that low.
			check := func(timeout, deadline time.Duration, what string) (late string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				_, err := s.Decide(ctx, q)
				if err == nil {
					t.Fatalf("%s: decided against a stopped server", what)
				}
				msg := err.Error()
				if !strings.Contains(msg, "dial tcp "+own.Addr()) || !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("%s: error %q does not name the refused connection to %s", what, msg, own.Addr())
				}
				if !strings.Contains(msg, "deadline") {
					return ""
				}
				named, ok := namedDeadline(msg)
				if !errors.Is(err, context.DeadlineExceeded) || !ok || named > deadline {
					t.Fatalf("%s: error %q: want the %v deadline named, and errors.Is(err, context.DeadlineExceeded)", what, msg, deadline)
				}
				if named <= deadline/2 {
					return fmt.Sprintf("%s: error %q names %v of the %v deadline", what, msg, named, deadline)
				}
				return ""
			}
			// Only an answer that said nothing is asked again: a store that names too
			// little of the deadline names too little every time.
			decide := func(timeout, deadline time.Duration, what string) {
				t.Helper()
				for attempt := 1; ; attempt++ {
					late := check(timeout, deadline, what)
					if late == "" {
						return
					}
					if attempt == deadlineAttempts {
						t.Fatalf("%s, in each of %d attempts: want more than half of it named", late, attempt)
					}
					t.Logf("%s: the machine may have stalled before the decision began; again", late)
				}
			}
			decide(time.Hour, time.Second, "decision 1, under the store's deadline")
			for i := range 3 {
				decide(100*time.Millisecond, 100*time.Millisecond, fmt.Sprintf("decision %d, under the caller's earlier deadline", i+2))
			}
		})
	}
}

// namedDeadline returns the deadline msg names ("gave up at the 100ms deadline"): for a
// caller's deadline, the time that was left when the decision started, which on a loaded
// machine is already less than the timeout the caller set.
func namedDeadline(msg string) (time.Duration, bool) {
	_, rest, ok := strings.Cut(msg, "gave up at the ")
	if !ok {
		return 0, false
	}
	named, _, ok := strings.Cut(rest, " deadline")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(named)
	return d, err == nil
}

// longest is p's longest period.
func longest(p *core.Policy) time.Duration {
	var l time.Duration
	for _, r := range p.Rates() {
		l = max(l, r.Period)
	}
	return l
}

// exact reports whether core keeps r as an exact log of grant times.
func exact(r core.Rate) bool { return r.Count <= bounds.LargestExact }

// warmUp decides q on s until a decision succeeds: the store's first call dials and loads
// its script, which on a loaded machine can outlast a short deadline. The tests that use
// it are about what happens after the server answered once.
func warmUp(t *testing.T, s *redisstore.Store, q core.Query) {
	t.Helper()
	var err error
	for range 50 {
		if _, err = s.Decide(context.Background(), q); err == nil {
			return
		}
	}
	t.Fatalf("the server never answered: %v", err)
}

// TestDenyCachedRefusalAllocatesNothing: a refusal answered from the deny cache, the path a
// client hammering a spent key takes, allocates nothing: the policy's rates are read from
// its cached plan, not copied per decision.
func TestDenyCachedRefusalAllocatesNothing(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	s := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)))
	q := core.Query{Policy: mustParse("1/1h,5/1d"), Key: "spent"}
	for range 2 {
		if _, err := s.Decide(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { s.Decide(ctx, q) }); n != 0 {
		t.Fatalf("%v allocations per refusal from the deny cache", n)
	}
}

// A key outlives the windows of its grants on the server's clock too: where its own clock
// leads the server's (grants recorded by a node whose clock ran ahead, before a failover),
// the expiry Redis counts from TIME must still reach the instant its grants leave, in every
// script. A store on a test clock plants a grant 400ms ahead of the server's; a decision on
// the server's clock is held forward to it; then TIME plus the key's PTTL must reach that
// grant's time plus the decision's FullReset.
func TestExpiryReachesTheWindowsEndWhenTheKeyClockLeads(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	c := newClient(t, standalone)
	const ahead = 400 * time.Millisecond
	for _, text := range []string{"3/1s", "300/1s", "3/1s,5/1s", "300/1s,500/1s", "3/1s,300/1s"} {
		p := mustParse(text)
		for attempt := 1; ; attempt++ {
			prefix := redisstore.WithPrefix(freshPrefix(t))
			st, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			planted := st.Add(ahead)
			planter := redisstore.New(c, roomy, prefix, redisstore.WithDenyCache(false),
				redisstore.WithClock(func() time.Time { return planted }))
			s := redisstore.New(c, roomy, prefix, redisstore.WithDenyCache(false))
			q := core.Query{Policy: p, Key: "k"}
			if d, err := planter.Decide(ctx, q); err != nil || !d.Allowed {
				t.Fatalf("%s: planting: %+v %v", text, d, err)
			}
			d, err := s.Decide(ctx, q)
			if err != nil || !d.Allowed {
				t.Fatalf("%s: %+v %v", text, d, err)
			}
			if d.Grant < planted.UnixMicro() {
				if attempt == 3 {
					t.Fatalf("%s: in %d attempts the server's clock passed the planted time before the decision", text, attempt)
				}
				continue
			}
			pttl, err := c.PTTL(ctx, s.Key(p, "", "k")).Result()
			if err != nil {
				t.Fatal(err)
			}
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if end, need := now.Add(pttl), time.UnixMicro(d.Grant).Add(d.FullReset); end.Before(need) {
				t.Errorf("%s: the key expires at TIME %s, %v before its grants leave their windows (%s)",
					text, end.Format("15:04:05.000"), need.Sub(end), need.Format("15:04:05.000"))
			}
			break
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
