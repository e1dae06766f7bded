package core_test

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/reqlimit/reqlimit/core"
)

// Benchmarks of one decision. Each reqlimit case runs beside golang.org/x/time/rate doing
// the same job in the same process, so results read as ratios:
//
//	go test ./core -run '^$' -bench . -benchmem
//
// "admitted" cases use limits that never run out at benchmark speed (a 1ns window); the
// "refused" cases use 1 per hour after the first request, so every call is refused.

var (
	admittedPolicy = mustPolicy(core.Rate{Count: 3, Period: time.Nanosecond})
	refusedPolicy  = mustPolicy(core.Rate{Count: 1, Period: time.Hour})
)

// admittedLimiter never runs out at benchmark speed but takes x/time/rate's real path:
// rate.Inf would skip its arithmetic and flatter it.
// paths are the two paths every benchmark measures, for both libraries.
var paths = []struct {
	name   string
	p      *core.Policy
	xlimit func() *rate.Limiter
}{{"admitted", admittedPolicy, admittedLimiter}, {"refused", refusedPolicy, refusedLimiter}}

func admittedLimiter() *rate.Limiter { return rate.NewLimiter(1e9, 1e9) }
func refusedLimiter() *rate.Limiter {
	l := rate.NewLimiter(rate.Every(time.Hour), 1)
	l.Allow()
	return l
}

func BenchmarkOneKeySerial(b *testing.B) {
	ctx := context.Background()
	for _, c := range paths {
		b.Run("xtimerate/"+c.name, func(b *testing.B) {
			l := c.xlimit()
			for b.Loop() {
				l.Allow()
			}
		})
		b.Run("reqlimit/"+c.name, func(b *testing.B) {
			s := core.NewMemoryStore(nil)
			q := core.Query{Policy: c.p, Scope: "GET /user/test", Key: "192.0.2.1"}
			s.Decide(ctx, q)
			for b.Loop() {
				s.Decide(ctx, q)
			}
		})
	}
	// The same decisions with the time passed in: what each costs without its clock read,
	// the part a faster clock cannot shrink.
	b.Run("xtimerate/explicit-time", func(b *testing.B) {
		l := admittedLimiter()
		now := time.Now()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			l.AllowN(now, 1)
		}
	})
	b.Run("reqlimit/explicit-time", func(b *testing.B) {
		s := core.NewMemoryStore(nil)
		q := core.Query{Policy: mustPolicy(core.Rate{Count: 3, Period: time.Microsecond}), Scope: "GET /user/test", Key: "192.0.2.1"}
		var now int64
		for b.Loop() {
			now += int64(time.Microsecond)
			s.DecideAt(q, now)
		}
	})
}

// BenchmarkFloor times, alone, the two steps no strict in-process decision can skip: a
// monotonic clock read (time.Since, as the memory store reads it) and an uncontended
// lock around the key's state. Their sum is the floor under BenchmarkOneKeySerial's
// reqlimit rows.
func BenchmarkFloor(b *testing.B) {
	var sink int64
	start := time.Now()
	b.Run("clock", func(b *testing.B) {
		for b.Loop() {
			sink += int64(time.Since(start))
		}
	})
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			sink++
			mu.Unlock()
		}
	})
	// The least a decision on one of many keys does: the clock and the lock, plus hashing
	// the scope and the client's key and finding the key's state in a map.
	b.Run("keyed", func(b *testing.B) {
		var mu sync.Mutex
		seed := maphash.MakeSeed()
		state := map[uint64]*int64{}
		scope, key := "GET /user/test", "192.0.2.1"
		state[maphash.String(seed, scope)^maphash.String(seed, key)] = new(int64)
		for b.Loop() {
			now := int64(time.Since(start))
			e := state[maphash.String(seed, scope)^maphash.String(seed, key)]
			mu.Lock()
			*e = now
			mu.Unlock()
		}
		sink += *state[maphash.String(seed, scope)^maphash.String(seed, key)]
	})
	if sink == 42 {
		b.Log(sink) // keeps sink live
	}
}

// BenchmarkInterleaved times an admitted decision on one key beside x/time/rate's Allow and
// beside the floor (BenchmarkFloor's clock read and lock), in turns of 64 in one loop, so
// that whatever else the machine does falls on all three alike: x-xtimerate and x-floor
// are reqlimit's time over theirs, steadier than dividing separate runs; ns/op counts one
// turn of each. Each policy size runs: a short exact log, a long one that holds grants in
// its window, and the bounded form for huge counts; none runs out at benchmark speed.
//
//	go test ./core -run '^$' -bench Interleaved -count 5
func BenchmarkInterleaved(b *testing.B) {
	for _, c := range []struct {
		name string
		p    *core.Policy
	}{
		{"3per1ns", admittedPolicy},
		{"256per1us", mustPolicy(core.Rate{Count: 256, Period: time.Microsecond})},
		{"1e9per1h", mustPolicy(core.Rate{Count: 1e9, Period: time.Hour})},
		{"1e7per100ms", mustPolicy(core.Rate{Count: 1e7, Period: 100 * time.Millisecond})},
	} {
		b.Run(c.name, func(b *testing.B) { interleaved(b, c.p) })
	}
}

func interleaved(b *testing.B, p *core.Policy) {
	ctx := context.Background()
	s := core.NewMemoryStore(nil)
	q := core.Query{Policy: p, Scope: "GET /user/test", Key: "192.0.2.1"}
	s.Decide(ctx, q)
	l := admittedLimiter()
	var mu sync.Mutex
	var last int64
	start := time.Now()
	const turn = 64
	var tr, tx, tf time.Duration
	admitted := true
	for b.Loop() {
		t0 := time.Now()
		for range turn {
			d, _ := s.Decide(ctx, q)
			admitted = admitted && d.Allowed
		}
		t1 := time.Now()
		for range turn {
			l.Allow()
		}
		t2 := time.Now()
		for range turn {
			now := int64(time.Since(start))
			mu.Lock()
			last = now
			mu.Unlock()
		}
		t3 := time.Now()
		tr, tx, tf = tr+t1.Sub(t0), tx+t2.Sub(t1), tf+t3.Sub(t2)
	}
	if !admitted || last == 0 {
		b.Fatal("a decision was refused")
	}
	b.ReportMetric(float64(tr)/float64(tx), "x-xtimerate")
	b.ReportMetric(float64(tr)/float64(tf), "x-floor")
	n := float64(b.N * turn)
	b.ReportMetric(float64(tr)/n, "reqlimit-ns")
	b.ReportMetric(float64(tx)/n, "xtimerate-ns")
	b.ReportMetric(float64(tf)/n, "floor-ns")
}

func BenchmarkOneKeyParallel(b *testing.B) {
	ctx := context.Background()
	for _, c := range paths {
		b.Run("xtimerate/"+c.name, func(b *testing.B) {
			l := c.xlimit()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Allow()
				}
			})
		})
		b.Run("reqlimit/"+c.name, func(b *testing.B) {
			s := core.NewMemoryStore(nil)
			q := core.Query{Policy: c.p, Scope: "GET /user/test", Key: "192.0.2.1"}
			s.Decide(ctx, q)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s.Decide(ctx, q)
				}
			})
		})
	}
}

// BenchmarkManyKeysParallel spreads decisions over 100,000 clients. x/time/rate has no
// keys, so its side is the usual pattern: a sync.Map of *rate.Limiter, filled beforehand.
func BenchmarkManyKeysParallel(b *testing.B) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	ctx := context.Background()
	for _, c := range paths {
		b.Run("xtimerate/"+c.name, func(b *testing.B) {
			var m sync.Map
			for _, k := range keys {
				m.Store(k, c.xlimit())
			}
			b.ResetTimer()
			var next atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(7919)
				for pb.Next() {
					i++
					l, _ := m.Load(keys[i%n])
					l.(*rate.Limiter).Allow()
				}
			})
		})
		b.Run("reqlimit/"+c.name, func(b *testing.B) {
			s := core.NewMemoryStore(nil)
			for _, k := range keys {
				s.Decide(ctx, core.Query{Policy: c.p, Scope: "GET /user/test", Key: k})
			}
			b.ResetTimer()
			var next atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				i := next.Add(7919)
				for pb.Next() {
					i++
					s.Decide(ctx, core.Query{Policy: c.p, Scope: "GET /user/test", Key: keys[i%n]})
				}
			})
		})
	}
}

// BenchmarkHeapPerKey reports the heap each tracked key costs, per policy: the live heap
// after GC with 100,000 keys.
func BenchmarkHeapPerKey(b *testing.B) {
	for _, text := range []string{"3/1m", "100/1m", "500/2s,2000/10s", "10000000/1s"} {
		b.Run(text, func(b *testing.B) {
			// Once: a loop would measure the heap while earlier stores await collection. A
			// new policy each run: a policy keeps the last store it was decided in alive,
			// which would count that store in the heap before this one.
			perKey := heapPerKey(mustParse(text), 100_000)
			for b.Loop() {
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// BenchmarkNewKeyAtCap times a decision for a key a full store has never seen (the store
// holds its cap of live keys, so the newcomer is decided in the overflow bucket) beside a
// decision for a key that a store below its cap already holds. A flood of distinct keys
// sends every request down the first path, so it must cost about what the second does:
// x-below-cap, their ratio, should stay at most 10. The two run in alternating batches of
// 32 in one process, so that the ratio holds whatever the machine's speed and load; ns/op
// is per batch pair.
//
//	go test ./core -run '^$' -bench NewKeyAtCap -benchmem
func BenchmarkNewKeyAtCap(b *testing.B) {
	for _, n := range []int{100_000, 1 << 20} {
		b.Run(fmt.Sprint("cap=", n), func(b *testing.B) {
			ctx := context.Background()
			// Every filled key stays live. One policy a store: a policy remembers the last
			// store it was decided in, and alternating would cost both sides a lookup.
			p, pBelow := mustPolicy(core.Rate{Count: 1, Period: time.Hour}), mustPolicy(core.Rate{Count: 1, Period: time.Hour})
			full := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: n})
			below := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: 2 * n})
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
				full.Decide(ctx, core.Query{Policy: p, Scope: "GET /user/test", Key: keys[i]})
				below.Decide(ctx, core.Query{Policy: pBelow, Scope: "GET /user/test", Key: keys[i]})
			}
			if full.Len() != n || below.Len() != n {
				b.Fatalf("filled %d and %d keys, want %d", full.Len(), below.Len(), n)
			}
			// A full store of live keys never gives a newcomer an entry, so reusing these
			// names keeps every one of them new.
			newcomers := make([]string, 1<<16)
			for i := range newcomers {
				newcomers[i] = fmt.Sprintf("new-%d", i)
			}
			const batch = 32
			var atCap, belowCap time.Duration
			var decisions, i, j int
			for b.Loop() {
				start := time.Now()
				for range batch {
					full.Decide(ctx, core.Query{Policy: p, Scope: "GET /user/test", Key: newcomers[i]})
					i = (i + 1) % len(newcomers)
				}
				mid := time.Now()
				for range batch {
					below.Decide(ctx, core.Query{Policy: pBelow, Scope: "GET /user/test", Key: keys[j]})
					j = (j + 1) % n
				}
				belowCap += time.Since(mid)
				atCap += mid.Sub(start)
				decisions += batch
			}
			if full.Len() != n {
				b.Fatalf("full store holds %d keys, want %d", full.Len(), n)
			}
			b.ReportMetric(float64(atCap)/float64(decisions), "ns/new-key-at-cap")
			b.ReportMetric(float64(belowCap)/float64(decisions), "ns/key-below-cap")
			b.ReportMetric(float64(atCap)/float64(belowCap), "x-below-cap")
		})
	}
}
