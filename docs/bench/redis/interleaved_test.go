package bench

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// A decider makes one decision; rng is its goroutine's own, for choosing keys.
type decider func(ctx context.Context, rng *rand.Rand) error

// phase is how long one library has the server before the other takes over.
const phase = 50 * time.Millisecond

// interleave runs the two libraries in turn, phase by phase, each with n goroutines, so
// that a change in the machine's load (other jobs, the VM's neighbours) falls on both
// alike, where the ratio of two separate runs moves with the load. Each b.Loop iteration
// is one phase of each. It reports both libraries' decisions per second and p99, and their
// ratio.
func interleave(b *testing.B, n int, ours, theirs decider) {
	client.FlushDB(context.Background())
	var lat [2][]time.Duration
	var busy [2]time.Duration
	for b.Loop() {
		for side, d := range [2]decider{ours, theirs} {
			l, el := runPhase(b, n, d)
			lat[side] = append(lat[side], l...)
			busy[side] += el
		}
	}
	names := [2]string{"reqlimit", "redis_rate"}
	var rate [2]float64
	for side := range lat {
		slices.Sort(lat[side])
		rate[side] = float64(len(lat[side])) / busy[side].Seconds()
		b.ReportMetric(rate[side], names[side]+"-decisions/s")
		if n := len(lat[side]); n > 0 {
			b.ReportMetric(float64(lat[side][n*99/100])/1e3, names[side]+"-p99-µs")
		}
	}
	b.ReportMetric(rate[0]/rate[1], "x-redis_rate")
	b.ReportMetric(0, "ns/op")
}

// runPhase drives d from n goroutines for one phase and returns every call's latency.
func runPhase(b *testing.B, n int, d decider) ([]time.Duration, time.Duration) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(phase)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			ctx := context.Background()
			own := make([]time.Duration, 0, 256)
			for t0 := time.Now(); t0.Before(stop); t0 = time.Now() {
				if err := d(ctx, rng); err != nil {
					b.Error(err)
					return
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			all = append(all, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start)
}

// BenchmarkInterleaved compares the admitted paths of the other benchmarks, and the
// refused key, with the two libraries taking turns on the server (see interleave).
//
//	go test -run '^$' -bench Interleaved -benchtime 3s
func BenchmarkInterleaved(b *testing.B) {
	rr := redis_rate.NewLimiter(client)
	store := redisstore.New(client, redisstore.WithTimeout(time.Second))
	noCache := redisstore.New(client, redisstore.WithTimeout(time.Second), redisstore.WithDenyCache(false))
	// unshared keeps a flight per goroutine, so no two decisions share a round trip: the
	// store without its queue's sharing, to show what the sharing is worth.
	unshared := redisstore.New(client, redisstore.WithTimeout(time.Second), redisstore.WithDenyCache(false), redisstore.WithFlights(goroutines))
	rrHot := func(ctx context.Context, _ *rand.Rand) error {
		_, err := rr.Allow(ctx, "hot", redis_rate.PerSecond(1000000000))
		return err
	}
	// The hot rows are meant to measure admissions, which cost the server a write, so they
	// report the share of reqlimit's decisions that were admitted.
	var decided, admitted atomic.Int64
	hot := func(s *redisstore.Store, policy string) decider {
		q := core.Query{Policy: parsePolicy(policy), Key: "hot"}
		return func(ctx context.Context, _ *rand.Rand) error {
			d, err := s.Decide(ctx, q)
			decided.Add(1)
			if d.Allowed {
				admitted.Add(1)
			}
			return err
		}
	}
	hotRun := func(name string, n int, ours decider) {
		b.Run(name, func(b *testing.B) {
			decided.Store(0)
			admitted.Store(0)
			interleave(b, n, ours, rrHot)
			b.ReportMetric(100*float64(admitted.Load())/float64(max(1, decided.Load())), "reqlimit-admitted-%")
		})
	}
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "client-" + strconv.Itoa(i)
	}
	many := parsePolicy("100/1m")
	hotRun("hot-bounded", goroutines, hot(store, "1000000000/1s"))
	hotRun("hot-exact100", goroutines, hot(noCache, "100/100us"))
	// One goroutine: no queue forms, so this shows what the queue costs a lone decision.
	hotRun("hot-exact100-1goroutine", 1, hot(noCache, "100/100us"))
	hotRun("hot-exact100-unshared", goroutines, hot(unshared, "100/100us"))
	// Two rates on one route, as "500 per 2s and 2000 per 10s": bounded.lua and exact.lua
	// with two rates each.
	hotRun("hot-two-bounded", goroutines, hot(store, "500000000/2s,2000000000/10s"))
	hotRun("hot-two-exact", goroutines, hot(noCache, "100/100us,200/1ms"))
	b.Run("many-keys", func(b *testing.B) {
		interleave(b, goroutines, func(ctx context.Context, rng *rand.Rand) error {
			_, err := store.Decide(ctx, core.Query{Policy: many, Key: names[rng.IntN(keys)]})
			return err
		}, func(ctx context.Context, rng *rand.Rand) error {
			_, err := rr.Allow(ctx, names[rng.IntN(keys)], redis_rate.PerMinute(100))
			return err
		})
	})
	b.Run("refused", func(b *testing.B) {
		spent := core.Query{Policy: parsePolicy("1/1h"), Key: "spent"}
		interleave(b, goroutines, func(ctx context.Context, _ *rand.Rand) error {
			_, err := store.Decide(ctx, spent)
			return err
		}, func(ctx context.Context, _ *rand.Rand) error {
			_, err := rr.Allow(ctx, "spent", redis_rate.PerHour(1))
			return err
		})
	})
}
