package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/httprate"
	"github.com/go-redis/redis_rate/v10"
	"github.com/gofiber/fiber/v2/middleware/limiter"
	limiter3 "github.com/gofiber/fiber/v3/middleware/limiter"
	"github.com/labstack/echo/v4/middleware"
	middleware5 "github.com/labstack/echo/v5/middleware"
	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/echolimit"
	echolimit5 "github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/fiberlimit"
	fiberlimit3 "github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A peer is one limiter under test, configured as its documentation intends for
// "count per period".
type peer struct {
	name   string // the table's row
	scheme string // what it does, in its own documentation's terms
	redis  bool   // keeps its state in Redis (needs -redis)
	// newAllow builds a fresh instance, with its own state, enforcing count per period.
	newAllow func(count int, period time.Duration) (allowFunc, error)
	// fast is a count and period that never run out at benchmark speed but take the same
	// code path as 100 per second, for the admitted-path decision benchmark.
	fast spec
	// framework names, for middleware, the framework whose bare route (bareRoutes) is the
	// baseline of the overhead; "" for library peers.
	framework string
}

type spec struct {
	count  int
	period time.Duration
}

// unlimited keeps a counter or a token bucket admitting at benchmark speed: a benchmark
// makes far fewer than 2³⁰ calls. The window is an hour, not a second, because
// sethvargo/go-limiter refills interval/tokens (rounded down) per tick: 0 when tokens
// outnumber the interval's nanoseconds. reqlimit cannot use it: above 256 a window (bounds.LargestExact) it
// switches to its bounded form, another code path, so its fast spec shortens the window
// instead (100 per ns).
var unlimited = spec{1 << 30, time.Hour}

var bg = context.Background()

// rdb is the Redis the Redis peers use, set once redis-server is up.
var rdb *redis.Client

// redisPrefix gives every Redis-backed instance keys of its own, so no scenario sees
// another's state.
var redisSeq atomic.Int64

func redisPrefix() string { return fmt.Sprintf("cmp%d:", redisSeq.Add(1)) }

var errNoRedis = errors.New("no redis-server (run without -redis=false)")

func peers() []peer {
	return []peer{
		{
			name: "reqlimit `Decide` (memory)", scheme: "exact sliding log",
			newAllow: reqlimitDecide(func() (core.Store, error) { return core.NewMemoryStore(nil), nil }),
			fast:     spec{100, time.Nanosecond},
		},
		{
			name: "reqlimit `nethttp.Limit` (memory)", scheme: "exact sliding log",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				// Its own store: the process-wide default would share buckets between instances.
				return netHTTPRoute(nethttp.Limit(count, period, core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods())), nil
			},
			fast:      spec{100, time.Nanosecond},
			framework: "net/http",
		},
		{
			name: "reqlimit `echolimit.Limit` (Echo v4, memory)", scheme: "exact sliding log",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				return echoRoute(echolimit.Limit(count, period, core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods())), nil
			},
			fast: spec{100, time.Nanosecond}, framework: "Echo v4",
		},
		{
			name: "reqlimit `echolimit.Limit` (Echo v5, memory)", scheme: "exact sliding log",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				return echo5Route(echolimit5.Limit(count, period, core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods())), nil
			},
			fast: spec{100, time.Nanosecond}, framework: "Echo v5",
		},
		{
			name: "reqlimit `fiberlimit.Limit` (Fiber v2, memory)", scheme: "exact sliding log",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				return fiberRoute(fiberlimit.Limit(count, period, core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods())), nil
			},
			fast: spec{100, time.Nanosecond}, framework: "Fiber v2",
		},
		{
			name: "reqlimit `fiberlimit.Limit` (Fiber v3, memory)", scheme: "exact sliding log",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				return fiber3Route(fiberlimit3.Limit(count, period, core.WithStore(core.NewMemoryStore(nil)), core.WithShortPeriods())), nil
			},
			fast: spec{100, time.Nanosecond}, framework: "Fiber v3",
		},
		{
			name: "x/time/rate", scheme: "token bucket",
			newAllow: xtimerate, fast: unlimited,
		},
		{
			name: "ulule/limiter (memory)", scheme: "fixed window",
			newAllow: ululeMemory, fast: unlimited,
		},
		{
			name: "sethvargo/go-limiter", scheme: "fixed window (a bucket refilled whole each interval)",
			newAllow: sethvargo, fast: unlimited,
		},
		{
			name: "go-chi/httprate", scheme: "sliding window counter (approximate)",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				return netHTTPRoute(httprate.LimitBy(count, period, clientIP)), nil
			},
			fast:      unlimited,
			framework: "net/http",
		},
		{
			name: "Fiber v2 limiter `FixedWindow`", scheme: "fixed window",
			newAllow: fiberLimiter(limiter.FixedWindow{}), fast: unlimited,
			framework: "Fiber v2",
		},
		{
			name: "Fiber v2 limiter `SlidingWindow`", scheme: "sliding window counter (approximate)",
			newAllow: fiberLimiter(limiter.SlidingWindow{}), fast: unlimited,
			framework: "Fiber v2",
		},
		{
			name: "Fiber v3 limiter `FixedWindow`", scheme: "fixed window",
			newAllow: fiber3Limiter(limiter3.FixedWindow{}), fast: unlimited,
			framework: "Fiber v3",
		},
		{
			name: "Fiber v3 limiter `SlidingWindow`", scheme: "sliding window counter (approximate)",
			newAllow: fiber3Limiter(limiter3.SlidingWindow{}), fast: unlimited,
			framework: "Fiber v3",
		},
		{
			name: "Echo v4 `RateLimiter` (memory)", scheme: "token bucket (x/time/rate)",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
					Rate: perSecond(count, period), Burst: count, ExpiresIn: 3 * time.Minute,
				})
				return echoRoute(middleware.RateLimiter(store)), nil
			},
			fast:      unlimited,
			framework: "Echo v4",
		},
		{
			name: "Echo v5 `RateLimiter` (memory)", scheme: "token bucket (x/time/rate)",
			newAllow: func(count int, period time.Duration) (allowFunc, error) {
				store := middleware5.NewRateLimiterMemoryStoreWithConfig(middleware5.RateLimiterMemoryStoreConfig{
					Rate: float64(perSecond(count, period)), Burst: count, ExpiresIn: 3 * time.Minute,
				})
				return echo5Route(middleware5.RateLimiter(store)), nil
			},
			fast:      unlimited,
			framework: "Echo v5",
		},
		{
			name: "reqlimit `Decide` (Redis)", scheme: "exact sliding log", redis: true,
			newAllow: reqlimitDecide(func() (core.Store, error) {
				if rdb == nil {
					return nil, errNoRedis
				}
				return redisstore.New(rdb, redisstore.WithPrefix(redisPrefix())), nil
			}),
			fast: spec{100, time.Nanosecond},
		},
		{
			name: "ulule/limiter (Redis)", scheme: "fixed window", redis: true,
			newAllow: ululeRedis, fast: unlimited,
		},
		{
			name: "go-redis/redis_rate", scheme: "GCRA (token bucket)", redis: true,
			newAllow: redisRate, fast: unlimited,
		},
	}
}

// bareRoutes are the frameworks' GET / without a limiter: the baseline of the overhead.
var bareRoutes = map[string]func() allowFunc{
	"net/http": func() allowFunc { return netHTTPRoute(nil) },
	"Fiber v2": func() allowFunc { return fiberRoute(nil) },
	"Fiber v3": func() allowFunc { return fiber3Route(nil) },
	"Echo v4":  func() allowFunc { return echoRoute(nil) },
	"Echo v5":  func() allowFunc { return echo5Route(nil) },
}

func reqlimitDecide(store func() (core.Store, error)) func(int, time.Duration) (allowFunc, error) {
	return func(count int, period time.Duration) (allowFunc, error) {
		p, err := core.NewPolicy(core.Rate{Count: count, Period: period})
		if err != nil {
			return nil, err
		}
		s, err := store()
		if err != nil {
			return nil, err
		}
		return func(key string) (bool, error) {
			d, err := s.Decide(bg, core.Query{Policy: p, Scope: "GET /", Key: key})
			return d.Allowed, err
		}, nil
	}
}

func perSecond(count int, period time.Duration) rate.Limit {
	return rate.Limit(float64(count) / period.Seconds())
}

// xtimerate is one rate.Limiter per key in a locked map, as its documentation suggests
// for per-client limits: rate count/period, burst count.
func xtimerate(count int, period time.Duration) (allowFunc, error) {
	var mu sync.Mutex
	m := map[string]*rate.Limiter{}
	return func(key string) (bool, error) {
		mu.Lock()
		l := m[key]
		if l == nil {
			l = rate.NewLimiter(perSecond(count, period), count)
			m[key] = l
		}
		mu.Unlock()
		return l.Allow(), nil
	}, nil
}

func ululeAllow(store ulule.Store, count int, period time.Duration) allowFunc {
	l := ulule.New(store, ulule.Rate{Period: period, Limit: int64(count)})
	return func(key string) (bool, error) {
		c, err := l.Get(bg, key)
		return err == nil && !c.Reached, err
	}
}

func ululeMemory(count int, period time.Duration) (allowFunc, error) {
	return ululeAllow(ulmemory.NewStore(), count, period), nil
}

func ululeRedis(count int, period time.Duration) (allowFunc, error) {
	if rdb == nil {
		return nil, errNoRedis
	}
	store, err := ulredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: redisPrefix()})
	if err != nil {
		return nil, err
	}
	return ululeAllow(store, count, period), nil
}

func sethvargo(count int, period time.Duration) (allowFunc, error) {
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(count), Interval: period})
	if err != nil {
		return nil, err
	}
	return func(key string) (bool, error) {
		_, _, _, ok, err := store.Take(bg, key)
		return ok, err
	}, nil
}

// clientIP keys httprate by the connection's peer, as its documentation's replacement
// for the deprecated KeyByIP does.
func clientIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return httprate.CanonicalizeIP(host), err
}

func fiberLimiter(kind limiter.LimiterHandler) func(int, time.Duration) (allowFunc, error) {
	return func(count int, period time.Duration) (allowFunc, error) {
		return fiberRoute(limiter.New(limiter.Config{Max: count, Expiration: period, LimiterMiddleware: kind})), nil
	}
}

func fiber3Limiter(kind limiter3.Handler) func(int, time.Duration) (allowFunc, error) {
	return func(count int, period time.Duration) (allowFunc, error) {
		return fiber3Route(limiter3.New(limiter3.Config{Max: count, Expiration: period, LimiterMiddleware: kind})), nil
	}
}

func redisRate(count int, period time.Duration) (allowFunc, error) {
	if rdb == nil {
		return nil, errNoRedis
	}
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: count, Burst: count, Period: period}
	prefix := redisPrefix()
	return func(key string) (bool, error) {
		res, err := l.Allow(bg, prefix+key, lim)
		return err == nil && res.Allowed > 0, err
	}, nil
}
