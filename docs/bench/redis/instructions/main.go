// Command instructions makes a fixed number of rate-limit decisions against a redis-server,
// for instructions.sh, which runs that server under valgrind's callgrind and reports the
// server's instructions per decision: a count that, unlike decisions per second, does not
// move with the machine's load.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the redis-server to decide on (loopback)")
	name := flag.String("case", "hot100", "which decisions: "+fmt.Sprint(names()))
	n := flag.Int("n", 1, "how many decisions")
	flag.Parse()
	c, ok := cases[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "instructions: unknown case %q, want one of %v\n", *name, names())
		os.Exit(2)
	}
	client := redis.NewClient(&redis.Options{Addr: *addr})
	defer client.Close()
	ctx := context.Background()
	decide := c(client)
	admitted := 0
	for i := range *n {
		ok, err := decide(ctx, i)
		if err != nil {
			fmt.Fprintf(os.Stderr, "instructions: %s, decision %d: %v\n", *name, i, err)
			os.Exit(1)
		}
		if ok {
			admitted++
		}
	}
	// A hot case must stay admitted (a refusal writes nothing, and costs less).
	fmt.Printf("admitted %d of %d\n", admitted, *n)
}

// The cases match the benchmarks in bench_test.go. Under callgrind the server runs many
// times slower, so the hot one-rate exact limits use a 20ms window (rather than 1ms) to
// stay admitted with a full ring.
var cases = map[string]func(*redis.Client) func(context.Context, int) (bool, error){
	"hot100":  reqlimitHot("100/20ms"),
	"hot256":  reqlimitHot("256/20ms"),
	"bounded": reqlimitHot("1000000000/1s"),
	// Several rates per route, hot: two exact, two bounded, one of each.
	"multi-exact":   reqlimitHot("100/10ms,200/50ms"),
	"multi-bounded": reqlimitHot("1000/100ms,5000/1s"),
	"mixed":         reqlimitHot("100/10ms,1000000/1s"),
	"fresh":         reqlimitKeys("100/1m", 0),
	"fresh-bounded": reqlimitKeys("1000/1m", 0),
	// many: 700 keys in turn, each decided about three times in 2,000 (a young ring).
	"many": reqlimitKeys("100/1m", 700),
	"rr-many": func(c *redis.Client) func(context.Context, int) (bool, error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, i int) (bool, error) {
			r, err := l.Allow(ctx, "client-"+strconv.Itoa(i%700), redis_rate.PerMinute(100))
			return err == nil && r.Allowed > 0, err
		}
	},
	"rr-hot": func(c *redis.Client) func(context.Context, int) (bool, error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, _ int) (bool, error) {
			r, err := l.Allow(ctx, "hot", redis_rate.PerSecond(1000000000))
			return err == nil && r.Allowed > 0, err
		}
	},
	"rr-fresh": func(c *redis.Client) func(context.Context, int) (bool, error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, i int) (bool, error) {
			r, err := l.Allow(ctx, "client-"+strconv.Itoa(i), redis_rate.PerMinute(100))
			return err == nil && r.Allowed > 0, err
		}
	},
}

func reqlimitHot(policy string, opts ...redisstore.Option) func(*redis.Client) func(context.Context, int) (bool, error) {
	return func(c *redis.Client) func(context.Context, int) (bool, error) {
		s := redisstore.New(c, append([]redisstore.Option{redisstore.WithTimeout(time.Minute), redisstore.WithDenyCache(false)}, opts...)...)
		q := core.Query{Policy: mustParse(policy), Key: "hot"}
		return func(ctx context.Context, _ int) (bool, error) {
			d, err := s.Decide(ctx, q)
			return d.Allowed, err
		}
	}
}

// reqlimitKeys decides a new key each time, or with keys > 0 that many keys in turn.
func reqlimitKeys(policy string, keys int, opts ...redisstore.Option) func(*redis.Client) func(context.Context, int) (bool, error) {
	return func(c *redis.Client) func(context.Context, int) (bool, error) {
		s := redisstore.New(c, append([]redisstore.Option{redisstore.WithTimeout(time.Minute), redisstore.WithDenyCache(false)}, opts...)...)
		p := mustParse(policy)
		return func(ctx context.Context, i int) (bool, error) {
			if keys > 0 {
				i %= keys
			}
			d, err := s.Decide(ctx, core.Query{Policy: p, Key: "client-" + strconv.Itoa(i)})
			return d.Allowed, err
		}
	}
}

func names() []string {
	return []string{"hot100", "hot256", "bounded", "multi-exact", "multi-bounded", "mixed", "fresh", "fresh-bounded", "many", "rr-hot", "rr-fresh", "rr-many"}
}

// mustParse parses one of the cases' policies, which are all valid.
func mustParse(text string) *core.Policy {
	p, err := core.ParsePolicy(text)
	if err != nil {
		panic(err)
	}
	return p
}
