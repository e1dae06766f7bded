package redisstore_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// Giving back a grant that a Reset already forgot changes nothing. release.lua finds the
// grant by its time: the bucket of that time for a bounded rate (T/100 wide), the
// microsecond for the exact ring. After a Reset (then a DEL), grants recorded later in the
// same bucket or microsecond were taken for the forgotten one, and
// one of them given back: one request more than the count admitted in a window.
func TestReleaseAfterReset(t *testing.T) {
	for _, c := range []releaseAfterReset{
		{"300/1h", 10 * time.Millisecond, 0},       // bounded: a bucket is 36 s
		{"5/15m", 0, 0},                            // exact: the same microsecond
		{"2/1s,300/1h", 600 * time.Millisecond, 0}, // mixed: its bounded rate
		{"300/1h", -1, 0},                          // the server's clock (TIME), not a test clock's
	} {
		c.run(t)
	}
}

// The fence is the latest time a grant the reset forgot can carry: the key's own clock, not
// the reset's TIME. A grant is recorded at the key's clock, held forward to its newest grant
// or latest decision ("time never runs backwards for a key": a failover to a node whose
// clock lags), so when the clock a reset reads is behind the key's, a grant recorded before
// the reset carried a time later than a fence at TIME: release.lua did not recognise it as
// forgotten, and gave back a grant made after the reset in the same bucket or
// microsecond: one request more than the count in a window. Every layout: the test clock
// steps back 5 s for the reset, as a server's TIME after such a failover.
func TestResetFencesAtTheKeysClock(t *testing.T) {
	const back = 5 * time.Second
	for _, c := range []releaseAfterReset{
		{"5/15m", 0, back},                            // exact: the same microsecond
		{"5/1ms,5/15m", 0, back},                      // exact, several rates
		{"300/1h", time.Millisecond, back},            // bounded: a bucket is 36 s
		{"500/1h,300/2h", time.Millisecond, back},     // bounded, several rates
		{"2/1s,300/1h", 600 * time.Millisecond, back}, // mixed: its bounded rate
	} {
		c.run(t)
	}
}

// releaseAfterReset is a case of giving back, after a Reset, a grant the reset forgot: the
// policy, the test clock's step between decisions (-1: the server's clock),
// and how far the clock steps back for the reset (and forward again after it).
type releaseAfterReset struct {
	text string
	step time.Duration
	back time.Duration
}

func (c releaseAfterReset) run(t *testing.T) {
	name := c.text + map[bool]string{true: "/server-clock", false: ""}[c.step < 0]
	t.Run(name, func(t *testing.T) {
		needRedis(t)
		ctx := context.Background()
		// Off a unit's edge (as the server's clock nearly always is).
		clock := storetest.NewManualClock(time.Unix(1_700_000_000, int64(time.Millisecond)))
		opts := []redisstore.Option{roomy, redisstore.WithPrefix(freshPrefix(t))}
		if c.step >= 0 {
			opts = append(opts, redisstore.WithClock(clock.Now))
		}
		s := redisstore.New(newClient(t, standalone), append([]redisstore.Option{roomy}, opts...)...)
		p := mustParse(c.text)
		q := core.Query{Policy: p, Scope: "login", Key: "alice"}
		n := p.Rates()[len(p.Rates())-1].Count
		first, err := s.Decide(ctx, q)
		if err != nil || !first.Allowed {
			t.Fatalf("first: %+v %v", first, err)
		}
		clock.Advance(max(c.step, 0) - c.back)
		if err := s.Reset(ctx, q); err != nil {
			t.Fatal(err)
		}
		clock.Advance(c.back)
		admitted := 0
		for range n + 1 {
			clock.Advance(max(c.step, 0))
			if d, err := s.Decide(ctx, q); err != nil {
				t.Fatal(err)
			} else if d.Allowed {
				admitted++
			}
			if admitted == n {
				break
			}
		}
		if admitted != n {
			t.Fatalf("%d admitted after the reset, want %d", admitted, n)
		}
		// The first grant was forgotten by the reset: giving it back changes nothing.
		if err := s.Release(ctx, q, first.Grant); err != nil {
			t.Fatal(err)
		}
		clock.Advance(max(c.step, 0))
		if d, _ := s.Decide(ctx, q); d.Allowed {
			t.Fatalf("%v: %d grants after the reset (its clock %v behind the key's), then one more admitted within the window: giving back the grant the reset forgot (recorded at %d) took one made after it (%+v)", p, n, c.back, first.Grant, d)
		}
	})
}

// A reset of a key that holds nothing writes no fence: nothing could be taken for one of
// its grants, and a fence per such reset would only take memory.
func TestResetOfAnAbsentKeyLeavesNoFence(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	c := newClient(t, standalone)
	prefix := freshPrefix(t)
	s := redisstore.New(c, roomy, redisstore.WithPrefix(prefix))
	q := core.Query{Policy: mustParse("3/1m"), Key: "never-seen"}
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("after resetting an absent key: keys %q %v, want none", keys, err)
	}
	if _, err := s.Decide(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 1 || !strings.HasSuffix(keys[0], ":reset") {
		t.Fatalf("after resetting a used key: keys %q %v, want its fence alone", keys, err)
	}
}

// dropProxy forwards loopback connections to a Redis server; once armed, it swallows the
// next reply the server sends and closes that connection, as a connection reset (a proxy or
// load balancer dropping it, CLIENT KILL, a network blip) after the server ran the command.
// A new connection's handshake passes.
type dropProxy struct {
	ln    net.Listener
	armed atomic.Bool
	wg    sync.WaitGroup
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln}
	var conns sync.Map
	p.wg.Go(func() {
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
			conns.Store(c, s)
			p.wg.Go(func() { io.Copy(s, c); s.Close() })
			p.wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if err != nil {
						c.Close()
						return
					}
					// A new connection's HELLO is answered with a map ('%'): not a command's reply.
					if buf[0] != '%' && p.armed.CompareAndSwap(true, false) {
						c.Close()
						s.Close()
						return
					}
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
		conns.Range(func(c, s any) bool { c.(net.Conn).Close(); s.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	return p
}

// proxied returns a client of the standalone server through a dropProxy, and the proxy.
func proxied(t *testing.T, contextDeadlines bool) (redis.UniversalClient, func(string) *dropProxy) {
	px := startDropProxy(t, standalone.Addr())
	c := redis.NewClient(&redis.Options{Addr: px.ln.Addr().String(), ContextTimeoutEnabled: contextDeadlines})
	t.Cleanup(func() { c.Close() })
	return c, func(string) *dropProxy { return px }
}

// A give-back runs at most once. go-redis sends a command (or a pipeline) again when its
// connection ends before the reply (io.EOF is retryable, MaxRetries 3 by default), so a
// release the server ran, whose reply was lost, ran twice: release.lua gives back cost units
// from the bucket of the grant's time (bounded) or the entries at its time (exact),
// whichever grant they belong to, so two grants came back for one, and one request more
// than the count was admitted in a window. Each server's connections go through a proxy
// that drops the connection after the server ran the release, before its reply arrives;
// then the scripts are flushed, and a release (whose EVALSHA fails at EXEC, NOSCRIPT) must
// still give back exactly one grant.
func TestReleaseRunsOnceWhenItsReplyIsLost(t *testing.T) {
	needRedis(t)
	clients := map[string]func(t *testing.T) (redis.UniversalClient, func(key string) *dropProxy){
		// Sent by the caller.
		"Standalone": func(t *testing.T) (redis.UniversalClient, func(string) *dropProxy) {
			return proxied(t, true)
		},
		// Sent by a flight goroutine (the store's deadline guard).
		"Standalone/no-context-deadlines": func(t *testing.T) (redis.UniversalClient, func(string) *dropProxy) {
			return proxied(t, false)
		},
		"Cluster": func(t *testing.T) (redis.UniversalClient, func(string) *dropProxy) {
			proxies := map[string]*dropProxy{}
			for _, addr := range clusterAddrs() {
				proxies[addr] = startDropProxy(t, addr)
			}
			c := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs:                 clusterAddrs(),
				ContextTimeoutEnabled: true,
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					if px, ok := proxies[addr]; ok {
						addr = px.ln.Addr().String()
					}
					var d net.Dialer
					return d.DialContext(ctx, network, addr)
				},
			})
			t.Cleanup(func() { c.Close() })
			return c, func(key string) *dropProxy {
				node, err := c.MasterForKey(context.Background(), key)
				if err != nil {
					t.Fatalf("the master of %s: %v", key, err)
				}
				px, ok := proxies[node.Options().Addr]
				if !ok {
					t.Fatalf("the master of %s is %s, which has no proxy", key, node.Options().Addr)
				}
				return px
			}
		},
	}
	for name, newClient := range clients {
		for _, c := range []struct{ text string }{
			{"300/1h"}, // bounded: a bucket is 36 s
			{"5/15m"},  // exact: grants at one instant
		} {
			t.Run(name+"/"+c.text, func(t *testing.T) {
				ctx := context.Background()
				client, proxyOf := newClient(t)
				s := redisstore.New(client, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
				p := mustParse(c.text)
				n := p.Rates()[0].Count
				q := core.Query{Policy: p, Scope: "login", Key: "alice"}
				var grants []int64
				for len(grants) < n {
					d, err := s.Decide(ctx, q)
					if err != nil || !d.Allowed {
						t.Fatalf("grant %d: %+v %v", len(grants)+1, d, err)
					}
					grants = append(grants, d.Grant)
				}
				admittedOnce := func(what string) {
					t.Helper()
					admitted := 0
					for range 3 {
						d, err := s.Decide(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						if d.Allowed {
							admitted++
						}
					}
					if admitted != 1 {
						t.Fatalf("%v: %d grants, one given back (%s), then %d more admitted in the same window, want 1", p, n, what, admitted)
					}
				}
				// release.lua is cached on the server first (a release of a grant the key
				// never held), so that the reply dropped below is the release's own.
				if err := s.Release(ctx, q, 1); err != nil {
					t.Fatal(err)
				}
				px := proxyOf(s.Key(p, q.Scope, q.Key))
				px.armed.Store(true)
				err := s.Release(ctx, q, grants[n-1])
				if px.armed.Load() {
					t.Fatal("the proxy dropped nothing")
				}
				admittedOnce("its reply lost")
				// It may have run or not: the caller must hear that it failed.
				if err == nil {
					t.Fatal("a release whose reply was lost reported no error")
				}

				flushScripts(t, client)
				if err := s.Release(ctx, q, grants[n-2]); err != nil {
					t.Fatalf("release after SCRIPT FLUSH: %v", err)
				}
				admittedOnce("after SCRIPT FLUSH")
			})
		}
	}
}

// holdReply is a go-redis hook that, once armed, lets the next script call run on the server
// and then holds its reply back from the store until let is closed: what a goroutine that is
// descheduled between reading a refusal and caching it, or a reply read late on another
// pooled connection, looks like to the store.
type holdReply struct {
	armed atomic.Bool
	ran   chan struct{}
	let   chan struct{}
}

func (h *holdReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if (name != "evalsha" && name != "eval") || !h.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(h.ran)
		<-h.let
		return err
	}
}

// Store.Reset and Store.Release forget this process's cached refusal of the key, also one
// the server decided before them whose reply comes after they have returned: caching it
// would refuse the key locally for the refusal's whole wait (an hour here) although Redis,
// after the reset, admits. A Quota.Reset meant to unlock a client (after a password reset)
// would be void in this process, and a WithCountWhen give-back lost for the whole wait.
func TestRefusalDecidedBeforeResetIsNotCached(t *testing.T) {
	needRedis(t)
	for _, op := range []string{"Reset", "Release"} {
		t.Run(op, func(t *testing.T) {
			ctx := context.Background()
			c := newCtxClient(t, standalone)
			h := &holdReply{ran: make(chan struct{}), let: make(chan struct{})}
			c.AddHook(h)
			prefix := freshPrefix(t)
			s := redisstore.New(c, roomy, redisstore.WithPrefix(prefix))
			q := core.Query{Policy: mustParse("1/1h"), Scope: "login", Key: "alice"}
			first, err := s.Decide(ctx, q)
			if err != nil || !first.Allowed {
				t.Fatalf("first: %+v %v", first, err)
			}
			// A second request: the server refuses it (wait: an hour), and its reply is late.
			h.armed.Store(true)
			var wg sync.WaitGroup
			var late core.Decision
			wg.Go(func() { late, _ = s.Decide(ctx, q) })
			<-h.ran
			// Meanwhile the key is reset (or the grant given back), completely.
			switch op {
			case "Reset":
				err = s.Reset(ctx, q)
			case "Release":
				err = s.Release(ctx, q, first.Grant)
			}
			if err != nil {
				t.Fatal(err)
			}
			close(h.let)
			wg.Wait()
			if late.Allowed {
				t.Fatalf("the held request was admitted: %+v", late)
			}
			// After the reset, Redis has room: a request must be admitted.
			d, err := s.Decide(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				// Show that Redis itself would admit: a second store with no deny cache.
				pk := q
				pk.Mode = core.Peek
				redisSays, err := redisstore.New(newCtxClient(t, standalone), roomy, redisstore.WithPrefix(prefix), redisstore.WithDenyCache(false)).Decide(ctx, pk)
				t.Fatalf("after %s returned, the key is refused by this process's deny cache for another %v (%+v), although Redis would admit it (a Peek without the cache: allowed=%v remaining=%d, %v)", op, d.RetryAfter.Round(time.Second), d, redisSays.Allowed, redisSays.Remaining, err)
			}
		})
	}
}
