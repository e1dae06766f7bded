package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// sends counts what a client puts on the wire: single commands and pipelines.
type sends struct{ single, pipelines, piped atomic.Int64 }

func (h *sends) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sends) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		return next(ctx, cmd)
	}
}

func (h *sends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.piped.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestConcurrentDecisionsShareRoundTrips runs 64 goroutines on 16 keys of 50/1h, 40
// decisions each, with the scripts flushed from the server twice on the way: every key
// must admit exactly 50, no call may fail, decisions must have gone out in pipelines
// (fewer sends than decisions), and the queue must end empty.
func TestConcurrentDecisionsShareRoundTrips(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	own := ownServer(t)
	cases := map[string]func(t *testing.T) redis.UniversalClient{
		"Standalone":            func(t *testing.T) redis.UniversalClient { return newClient(t, own) },
		"ContextTimeoutEnabled": func(t *testing.T) redis.UniversalClient { return newCtxClient(t, own) },
		"Cluster":               func(t *testing.T) redis.UniversalClient { return newClusterClient(t) },
	}
	for name, newC := range cases {
		t.Run(name, func(t *testing.T) {
			c := newC(t)
			h := &sends{}
			c.AddHook(h)
			s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
			p := mustParse("50/1h")
			const goroutines, each, keys = 64, 40, 16
			var admitted [keys]atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						if g == 0 && (i == each/3 || i == 2*each/3) {
							flushScripts(t, c)
						}
						k := (g + i) % keys
						d, err := s.Decide(ctx, core.Query{Policy: p, Key: "k" + strconv.Itoa(k)})
						if err != nil {
							failed.Add(1)
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted[k].Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if failed.Load() > 0 {
				t.FailNow()
			}
			for k := range admitted {
				if n := admitted[k].Load(); n != 50 {
					t.Errorf("key k%d: %d admitted of %d decisions, want exactly 50", k, n, goroutines*each/keys)
				}
			}
			decisions := int64(goroutines * each)
			wire := h.single.Load() + h.pipelines.Load()
			t.Logf("%d decisions in %d sends (%d pipelines holding %d commands)", decisions, wire, h.pipelines.Load(), h.piped.Load())
			if h.pipelines.Load() == 0 || wire >= decisions {
				t.Errorf("%d decisions took %d sends (%d pipelines): concurrent decisions did not share round trips", decisions, wire, h.pipelines.Load())
			}
			waitIdle(t, s)
		})
	}
}

// TestConcurrentCallsMeetDeadline pauses the server under 32 goroutines deciding with a
// 100 ms deadline: every call must fail within the deadline plus slack, none may hang, and
// after the server resumes the same store must decide again with an empty queue.
func TestConcurrentCallsMeetDeadline(t *testing.T) {
	needRedis(t)
	own := ownServer(t)
	ctx := context.Background()
	const timeout = 100 * time.Millisecond
	for name, c := range map[string]*redis.Client{"DefaultClient": newClient(t, own), "ContextTimeoutEnabled": newCtxClient(t, own)} {
		t.Run(name, func(t *testing.T) {
			s := redisstore.New(c, redisstore.WithTimeout(timeout), redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
			p := mustParse("1000000/1h")
			warmUp(t, s, core.Query{Policy: p, Key: "warm"})
			signal(t, own, syscall.SIGSTOP)
			// A round is run again only when its slowest call was late: a late call may be
			// the machine's, but a decision against a paused server is the store's.
			for attempt := 1; ; attempt++ {
				var wg sync.WaitGroup
				var slowest atomic.Int64
				var succeeded atomic.Int64
				m := startStallMeter()
				for g := range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 3 {
							start := time.Now()
							_, err := s.Decide(ctx, core.Query{Policy: p, Key: "k" + strconv.Itoa(g*3+i)})
							el := time.Since(start)
							if err == nil {
								succeeded.Add(1)
							} else if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
								t.Errorf("paused server: %v, want a timeout", err)
							}
							for {
								old := slowest.Load()
								if int64(el) <= old || slowest.CompareAndSwap(old, int64(el)) {
									break
								}
							}
						}
					}()
				}
				wg.Wait()
				stall := m.Stop()
				if n := succeeded.Load(); n > 0 {
					t.Fatalf("%d decisions succeeded against a paused server", n)
				}
				el := time.Duration(slowest.Load())
				if el <= timeout+60*time.Millisecond+stall {
					break
				}
				if attempt == deadlineAttempts {
					t.Errorf("slowest call against a paused server took %v, deadline %v plus 60ms and the machine's delay %v, in each of %d rounds", el, timeout, stall, attempt)
					break
				}
				t.Logf("round %d: slowest call took %v, the machine's delay %v; again", attempt, el, stall)
			}
			signal(t, own, syscall.SIGCONT)
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, err := s.Decide(ctx, core.Query{Policy: p, Key: "after"})
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("decisions did not resume: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			waitIdle(t, s)
		})
	}
}

// waitIdle waits for flights a timeout left behind to land (they end by the client's
// own socket timeout) and fails if the queue does not empty.
func waitIdle(t *testing.T, s *redisstore.Store) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !s.QueueIdle(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("queue not idle 10 s after the last decision: a flight was lost")
		}
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func flushScripts(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
	} else {
		err = c.ScriptFlush(ctx).Err()
	}
	if err != nil {
		t.Error(err)
	}
}

// TestQueueSurvivesShortDeadlines runs 64 goroutines, each on its own key with its own
// limit, through few flights, with every second call under a deadline of 0-300 µs or
// cancelled after 0-200 µs: each answer must be its own key's (its limit, and Remaining
// going down), no flight may be lost (the queue empties), and the store must still decide.
func TestQueueSurvivesShortDeadlines(t *testing.T) {
	needRedis(t)
	own := ownServer(t)
	for _, flights := range []int{1, 2, 4} {
		for name, c := range map[string]*redis.Client{"DefaultClient": newClient(t, own), "ContextTimeoutEnabled": newCtxClient(t, own)} {
			t.Run(name+"/"+strconv.Itoa(flights), func(t *testing.T) {
				// The short deadlines are the callers' own; the store's is roomy, so that the
				// calls without one are answered however slow the machine.
				s := redisstore.New(c, roomy, redisstore.WithFlights(flights), roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
				var wg sync.WaitGroup
				var answered atomic.Int64
				for g := range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						limit := 100_000 * (g + 1)
						p := mustParse(strconv.Itoa(limit) + "/1h")
						last := limit
						for i := range 150 {
							ctx, cancel := context.Background(), context.CancelFunc(func() {})
							switch i % 4 {
							case 1:
								ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(300))*time.Microsecond)
							case 2:
								ctx, cancel = context.WithCancel(ctx)
								go func() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond); cancel() }()
							}
							d, err := s.Decide(ctx, core.Query{Policy: p, Key: "g" + strconv.Itoa(g)})
							cancel()
							if err != nil {
								continue
							}
							answered.Add(1)
							if d.Rate.Count != limit || d.Remaining >= last {
								t.Errorf("goroutine %d: %+v after Remaining %d: not its own key's answer", g, d, last)
								return
							}
							last = d.Remaining
						}
					}()
				}
				wg.Wait()
				if answered.Load() < 64*150/4 {
					t.Errorf("only %d of %d decisions answered: a quarter have no deadline of their own", answered.Load(), 64*150)
				}
				waitIdle(t, s)
				if _, err := s.Decide(context.Background(), core.Query{Policy: mustParse("5/1h"), Key: "after"}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestClusterMastersDown stops masters of a private 3-master cluster. With all three
// paused before a new client has loaded the cluster's map, a decision must still fail
// within its deadline (found in review: the map was loaded outside it, for seconds).
// Then it pauses, and kills, one master under 32 goroutines: decisions on keys the other
// masters hold must all succeed, since each master has its own queue, while those on the
// stopped one fail: paused, with timeouts that claim no refusal; killed, with errors that
// name the refused connection to it.
func TestClusterMastersDown(t *testing.T) {
	needRedis(t)
	nodes, err := startCluster(3)
	for _, n := range nodes {
		t.Cleanup(n.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := mustParse("1000000/1h")
	const timeout = 100 * time.Millisecond
	for _, n := range nodes {
		signal(t, n, syscall.SIGSTOP)
	}
	for _, ctxTimeout := range []bool{true, false} {
		what := fmt.Sprintf("ContextTimeoutEnabled %v, every master paused, map not loaded", ctxTimeout)
		withinDeadline(t, what, timeout, 100*time.Millisecond, func() error {
			// A new client each time: one that has loaded the map would not test this.
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(nodes), ContextTimeoutEnabled: ctxTimeout})
			defer c.Close()
			_, err := redisstore.New(c, redisstore.WithTimeout(timeout)).Decide(ctx, core.Query{Policy: p, Key: "k"})
			if err == nil {
				t.Fatalf("%s: decided", what)
			}
			return err
		})
	}
	for _, n := range nodes {
		signal(t, n, syscall.SIGCONT)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(nodes), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := redisstore.New(c, redisstore.WithTimeout(timeout), redisstore.WithDenyCache(false))
	var keys []string
	onDown := map[string]bool{}
	for i := range 300 {
		k := "k" + strconv.Itoa(i)
		m, err := c.MasterForKey(ctx, s.Key(p, "", k))
		if err != nil {
			t.Fatal(err)
		}
		onDown[k] = m.Options().Addr == nodes[0].Addr()
		keys = append(keys, k)
		warmUp(t, s, core.Query{Policy: p, Key: k}) // every master healthy: setup, not the test
	}
	// hammer runs 32 goroutines on random keys for a second. Healthy masters' decisions
	// failing, or the dead master's errors not naming the refusal, may be the machine's
	// doing (a stall past the deadline), so a hammer that shows either runs again; what
	// only the store can do fails the test at once.
	hammer := func(what string, check func(refused, other int) string) {
		t.Helper()
		for attempt := 1; ; attempt++ {
			var healthyOK, healthyFailed, downFailed atomic.Int64
			var mu sync.Mutex
			refused, other := 0, 0
			end := time.Now().Add(time.Second)
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(end) {
						k := keys[rand.IntN(len(keys))]
						_, err := s.Decide(ctx, core.Query{Policy: p, Key: k})
						switch {
						case onDown[k] && err != nil:
							downFailed.Add(1)
							mu.Lock()
							if strings.Contains(err.Error(), "dial tcp "+nodes[0].Addr()) && errors.Is(err, syscall.ECONNREFUSED) {
								refused++
							} else {
								other++
							}
							mu.Unlock()
						case err != nil:
							healthyFailed.Add(1)
						case !onDown[k]:
							healthyOK.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%s: keys on the other masters %d ok, %d failed; on the stopped one %d failed (%d naming a refused connection)", what, healthyOK.Load(), healthyFailed.Load(), downFailed.Load(), refused)
			if healthyOK.Load() == 0 || downFailed.Load() == 0 {
				t.Fatalf("%s: %d decisions on healthy masters succeeded, %d on the stopped one failed: want some, some", what, healthyOK.Load(), downFailed.Load())
			}
			why := check(refused, other)
			if n := healthyFailed.Load(); n > 0 {
				why = fmt.Sprintf("%d decisions on healthy masters failed", n)
			}
			if why == "" {
				return
			}
			if attempt == deadlineAttempts {
				t.Errorf("%s: %s, in each of %d runs", what, why, attempt)
				return
			}
			t.Logf("%s: %s; again", what, why)
		}
	}
	signal(t, nodes[0], syscall.SIGSTOP)
	hammer("one master paused", func(refused, _ int) string {
		if refused > 0 {
			t.Fatalf("one master paused: %d errors name a refused connection, which never happened", refused)
		}
		return ""
	})
	signal(t, nodes[0], syscall.SIGCONT)
	nodes[0].Stop()
	// Only calls that end before go-redis's first dial to the dead master has failed may
	// end in a plain timeout, about one per goroutine, where each spends the second mostly
	// waiting out deadlines on that master. go-redis alone names the refusal only once it
	// stops dialing and returns the dial error at once, in a small share of the calls.
	hammer("one master killed", func(refused, other int) string {
		if refused < other {
			return fmt.Sprintf("%d errors name the refused connection to %s, %d do not: want most to", refused, nodes[0].Addr(), other)
		}
		return ""
	})
}
