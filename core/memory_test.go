package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Run("VirtualClock", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			return storetest.Harness{
				Store:   core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now}),
				Advance: func(d time.Duration) { clock.Advance(d) },
			}
		})
	})
	t.Run("RealClock", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			return storetest.Harness{Store: core.NewMemoryStore(nil)}
		})
	})
}

// TestSweepingNeverChangesADecision runs one random workload on a store that sweeps on
// every decision and on one that never sweeps: every answer must be the same.
func TestSweepingNeverChangesADecision(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(0, 0))
	eager := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, SweepInterval: -1})
	lazy := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, SweepInterval: 1 << 62})
	policies := []*core.Policy{
		mustPolicy(core.Rate{Count: 3, Period: time.Second}),
		mustPolicy(core.Rate{Count: 2, Period: 100 * time.Millisecond}, core.Rate{Count: 5, Period: time.Second}),
		mustPolicy(core.Rate{Count: 1000, Period: time.Second}),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// 400 keys a policy over 64 shards: shards are shared, so a decision's sweep of its own
	// shard finds other keys gone idle, and the equivalence is tested on real reclaiming.
	dropped := 0
	for i := range 20_000 {
		clock.Advance(time.Duration(rng.Int64N(int64(30 * time.Millisecond))))
		q := core.Query{Policy: policies[rng.IntN(len(policies))], Key: fmt.Sprint(rng.IntN(400)), Cost: 1 + rng.IntN(2)}
		before := eager.Len()
		a, err1 := eager.Decide(context.Background(), q)
		b, err2 := lazy.Decide(context.Background(), q)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("decision %d (%v): swept store %+v %v, unswept %+v %v", i, q.Key, a, err1, b, err2)
		}
		if eager.Len() < before {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("eager sweeping never dropped a key: the equivalence was not put to the test")
	}
	t.Logf("decisions after which the eager store had dropped keys: %d", dropped)
	clock.Advance(2 * time.Second)
	core.SweepNow(lazy)
	if n := lazy.Len(); n != 0 {
		t.Fatalf("%d keys left after the longest window passed", n)
	}
}

// TestKeyCap fills a small store past its cap: live keys keep their own limits, newcomers
// share one overflow quota, and room returns once keys go idle.
func TestKeyCap(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(0, 0))
	const maxKeys = 64 * 4 // 4 per shard
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, MaxKeys: maxKeys})
	p := mustPolicy(core.Rate{Count: 2, Period: time.Minute})
	ctx := context.Background()
	var refusedNewcomers, admittedNewcomers int
	counts := map[string]int{}
	for i := range 5000 {
		k := fmt.Sprint("client-", i)
		for range 3 {
			d, err := store.Decide(ctx, core.Query{Policy: p, Key: k})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				counts[k]++
				admittedNewcomers++
			} else {
				refusedNewcomers++
			}
		}
	}
	for k, n := range counts {
		if n > 2 {
			t.Fatalf("%s got %d requests under 2 per minute", k, n)
		}
	}
	if n := store.Len(); n > maxKeys+64 {
		t.Fatalf("store holds %d keys, cap %d (plus at most one overflow bucket per shard)", n, maxKeys)
	}
	// Every key got its two, or shared the overflow: far fewer than 2 per key got through.
	if admittedNewcomers >= 2*5000 || admittedNewcomers < 2*maxKeys/2 {
		t.Fatalf("%d admitted of 15000: the cap did not bite, or live keys lost their quota", admittedNewcomers)
	}
	clock.Advance(time.Minute)
	if d, _ := store.Decide(ctx, core.Query{Policy: p, Key: "late"}); !d.Allowed {
		t.Fatal("after every key went idle, a new key was refused")
	}
	if d, _ := store.Decide(ctx, core.Query{Policy: p, Key: "late"}); !d.Allowed {
		t.Fatal("the new key did not get a bucket of its own once room returned")
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	store := core.NewMemoryStore(nil)
	ctx := context.Background()
	for _, p := range []*core.Policy{mustPolicy(core.Rate{Count: 3, Period: time.Minute}), mustPolicy(core.Rate{Count: 500, Period: 2 * time.Second}, core.Rate{Count: 2000, Period: 10 * time.Second})} {
		q := core.Query{Policy: p, Scope: "GET /user/{id}", Key: "192.0.2.1"}
		store.Decide(ctx, q)
		if n := testing.AllocsPerRun(1000, func() { store.Decide(ctx, q) }); n != 0 {
			t.Fatalf("%v: %v allocations per decision", p, n)
		}
	}
}

// TestHeapPerKey measures what each tracked key costs for a 3-per-minute policy.
func TestHeapPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100,000 keys")
	}
	perKey := heapPerKey(mustPolicy(core.Rate{Count: 3, Period: time.Minute}), 100_000)
	t.Logf("3/1m: %.1f bytes of heap per key", perKey)
	if perKey > 100 {
		t.Fatalf("%.1f bytes per key, want at most 100", perKey)
	}
}

func heapPerKey(p *core.Policy, n int) float64 { return heapPerKeyIn(p, n, nil) }

// heapPerKeyIn is heapPerKey in a store configured by cfg (MaxKeys is set to twice n).
func heapPerKeyIn(p *core.Policy, n int, cfg *core.MemoryConfig) float64 {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := core.MemoryConfig{}
	if cfg != nil {
		c = *cfg
	}
	c.MaxKeys = 2 * n
	store := core.NewMemoryStore(&c)
	for _, k := range keys {
		store.Decide(context.Background(), core.Query{Policy: p, Scope: "GET /user/test", Key: k})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	runtime.KeepAlive(keys)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestStoreRunsNoGoroutine backs the promise that there is nothing to close: stores made,
// used and swept leave the goroutine count where it was.
func TestStoreRunsNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	p := mustPolicy(core.Rate{Count: 2, Period: time.Millisecond})
	for i := range 50 {
		s := core.NewMemoryStore(&core.MemoryConfig{SweepInterval: -1, MaxKeys: 16})
		for k := range 100 {
			s.Decide(context.Background(), core.Query{Policy: p, Key: fmt.Sprint(i, "-", k)})
		}
		core.SweepNow(s)
	}
	runtime.GC()
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}
