// Package bench compares reqlimit's Redis store with github.com/go-redis/redis_rate/v10 on
// one redis-server, in one run. It is a separate module so that library users never
// download the peer. Run: go test -run '^$' -bench . -benchtime 1s -count 1
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

var (
	addr   string
	client *redis.Client
)

// TestMain starts a redis-server on a free loopback port for the run.
func TestMain(m *testing.M) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		// As the store's own tests (internal/redistest): absent, the benchmarks skip,
		// unless CI, which installs the server, runs them.
		fmt.Fprintln(os.Stderr, "bench: redis-server not found")
		if os.Getenv("CI") != "" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, _ := os.MkdirTemp("", "redis-bench-")
	defer os.RemoveAll(dir)
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	addr = "127.0.0.1:" + strconv.Itoa(port)
	client = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	for i := 0; client.Ping(context.Background()).Err() != nil; i++ {
		if i > 200 {
			fmt.Fprintln(os.Stderr, "bench: redis-server did not start")
			cmd.Process.Kill()
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code := m.Run()
	client.Close()
	cmd.Process.Kill()
	cmd.Wait()
	os.Exit(code)
}

const goroutines = 64

// run drives decide from 64 goroutines and reports decisions/s and p99 latency.
func run(b *testing.B, decide func(ctx context.Context, rng *rand.Rand) error) {
	b.Helper()
	client.FlushDB(context.Background())
	client.ConfigResetStat(context.Background())
	b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
	var mu sync.Mutex
	var lat []time.Duration
	var seed sync.Mutex
	n := uint64(0)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		seed.Lock()
		n++
		rng := rand.New(rand.NewPCG(n, 1))
		seed.Unlock()
		ctx := context.Background()
		own := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			if err := decide(ctx, rng); err != nil {
				b.Error(err)
				return
			}
			own = append(own, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, own...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/el.Seconds(), "decisions/s")
		b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(serverMicros(b), "server-µs/call")
}

// serverMicros reads the server's own time per script call from INFO commandstats.
func serverMicros(b *testing.B) float64 {
	info, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var calls, usec float64
	for _, line := range strings.Split(info, "\n") {
		for _, c := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), c); ok {
				var n, u float64
				fmt.Sscanf(rest, "calls=%g,usec=%g", &n, &u)
				calls += n
				usec += u
			}
		}
	}
	if calls == 0 {
		return 0
	}
	return usec / calls
}

// A generous limit on one hot key: every decision is admitted and recorded.
func BenchmarkHotKeyAdmitted(b *testing.B) {
	b.Run("reqlimit", func(b *testing.B) {
		s := redisstore.New(client, redisstore.WithTimeout(time.Second))
		q := core.Query{Policy: parsePolicy("1000000000/1s"), Key: "hot"}
		run(b, func(ctx context.Context, _ *rand.Rand) error { return admitted(s.Decide(ctx, q)) })
	})
	b.Run("reqlimit-exact", func(b *testing.B) {
		s := redisstore.New(client, redisstore.WithTimeout(time.Second))
		q := core.Query{Policy: parsePolicy("256/1ms"), Key: "hot"}
		run(b, func(ctx context.Context, _ *rand.Rand) error { _, err := s.Decide(ctx, q); return err })
	})
	b.Run("reqlimit-exact100", func(b *testing.B) {
		// A typical ring size (100 entries) on a hot key, generous enough to stay (almost)
		// always admitted at these rates; the deny cache is off so that every decision,
		// admitted or not, reaches Redis. admitted-% reports the share admitted.
		s := redisstore.New(client, redisstore.WithTimeout(time.Second), redisstore.WithDenyCache(false))
		q := core.Query{Policy: parsePolicy("100/100us"), Key: "hot"}
		var ok, all atomic.Int64
		run(b, func(ctx context.Context, _ *rand.Rand) error {
			d, err := s.Decide(ctx, q)
			all.Add(1)
			if d.Allowed {
				ok.Add(1)
			}
			return err
		})
		b.ReportMetric(100*float64(ok.Load())/float64(max(1, all.Load())), "admitted-%")
	})
	b.Run("redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(client)
		lim := redis_rate.PerSecond(1000000000)
		run(b, func(ctx context.Context, _ *rand.Rand) error { return rrAdmitted(l.Allow(ctx, "hot", lim)) })
	})
}

// 100,000 keys drawn at random, 100 per minute each: mostly admitted, spread over memory.
func BenchmarkManyKeys(b *testing.B) {
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "client-" + strconv.Itoa(i)
	}
	b.Run("reqlimit", func(b *testing.B) {
		s := redisstore.New(client, redisstore.WithTimeout(time.Second))
		p := parsePolicy("100/1m")
		run(b, func(ctx context.Context, rng *rand.Rand) error {
			_, err := s.Decide(ctx, core.Query{Policy: p, Key: names[rng.IntN(keys)]})
			return err
		})
	})
	b.Run("redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(client)
		lim := redis_rate.PerMinute(100)
		run(b, func(ctx context.Context, rng *rand.Rand) error {
			_, err := l.Allow(ctx, names[rng.IntN(keys)], lim)
			return err
		})
	})
}

// One key whose quota is spent: every decision is a refusal.
func BenchmarkRefusedKey(b *testing.B) {
	b.Run("reqlimit", func(b *testing.B) {
		s := redisstore.New(client, redisstore.WithTimeout(time.Second))
		q := core.Query{Policy: parsePolicy("1/1h"), Key: "spent"}
		run(b, func(ctx context.Context, _ *rand.Rand) error { _, err := s.Decide(ctx, q); return err })
	})
	b.Run("reqlimit-nocache", func(b *testing.B) {
		s := redisstore.New(client, redisstore.WithTimeout(time.Second), redisstore.WithDenyCache(false))
		q := core.Query{Policy: parsePolicy("1/1h"), Key: "spent"}
		run(b, func(ctx context.Context, _ *rand.Rand) error { _, err := s.Decide(ctx, q); return err })
	})
	b.Run("redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(client)
		lim := redis_rate.PerHour(1)
		run(b, func(ctx context.Context, _ *rand.Rand) error { _, err := l.Allow(ctx, "spent", lim); return err })
	})
}

func admitted(d core.Decision, err error) error {
	if err == nil && !d.Allowed {
		return fmt.Errorf("refused under a generous limit: %+v", d)
	}
	return err
}

func rrAdmitted(r *redis_rate.Result, err error) error {
	if err == nil && r.Allowed == 0 {
		return fmt.Errorf("redis_rate refused under a generous limit: %+v", r)
	}
	return err
}

// parsePolicy reads a policy's text, microsecond periods included: the hot benchmarks use
// windows short enough never to fill, so that every decision is admitted.
func parsePolicy(text string) *core.Policy {
	l, err := adapter.Parse(text, core.WithShortPeriods(), core.WithStore(core.NewMemoryStore(nil)))
	if err != nil {
		panic(err)
	}
	return l.Policy()
}
