package redisstore_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// startLatencyProxy forwards to target, holding each chunk of replies for delay: a network
// round trip of about delay.
func startLatencyProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { io.Copy(s, c); s.Close() })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if err != nil {
						c.Close()
						return
					}
					time.Sleep(delay)
					if _, err := c.Write(buf[:n]); err != nil {
						s.Close()
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// WithCountWhen gives back the grant of every request it does not count (a login limit
// counting failures gives back every success), so releases come as often as decisions.
// They share round trips as decisions do: the releases of one flight go in one MULTI/EXEC
// (which go-redis never sends twice). Sent one transaction after another, 300 concurrent
// releases over a 20 ms round trip took over a second, past a 1 s deadline, where the
// decisions of the same load all answered in a few round trips.
func TestReleasesShareRoundTrips(t *testing.T) {
	needRedis(t)
	const n = 300
	prefix := freshPrefix(t)
	p, err := core.ParsePolicy("10/1m")
	if err != nil {
		t.Fatal(err)
	}
	direct := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix))
	ctx := context.Background()
	grants := make([]int64, n)
	for i := range n {
		d, err := direct.Decide(ctx, core.Query{Policy: p, Scope: "s", Key: "k" + string(rune('A'+i%26)) + string(rune('a'+i/26)), Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		grants[i] = d.Grant
	}
	addr := startLatencyProxy(t, standalone.Addr(), 20*time.Millisecond)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	s := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(time.Second))
	key := func(i int) string { return "k" + string(rune('A'+i%26)) + string(rune('a'+i/26)) }
	// Warm up the connections and scripts.
	for range 4 {
		s.Decide(ctx, core.Query{Policy: p, Scope: "warm", Key: "w", Mode: core.Peek})
	}
	run := func(f func(i int) error) int {
		var failed atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if f(i) != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		return int(failed.Load())
	}
	decideFailed := run(func(i int) error {
		_, err := s.Decide(ctx, core.Query{Policy: p, Scope: "other", Key: key(i), Cost: 1})
		return err
	})
	releaseFailed := run(func(i int) error {
		return s.Release(ctx, core.Query{Policy: p, Scope: "s", Key: key(i), Cost: 1}, grants[i])
	})
	t.Logf("%d concurrent decisions: %d failed; %d concurrent releases: %d failed", n, decideFailed, n, releaseFailed)
	if releaseFailed > decideFailed+n/10 {
		t.Errorf("%d of %d concurrent releases failed (deadline), against %d of %d decisions under the same load", releaseFailed, n, decideFailed, n)
	}
}
