package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// closedAddr returns a loopback address with nothing listening on it.
func closedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A countingHook counts a client's connection attempts, and the script calls it is given
// to send (each try of a command once, whatever go-redis does with it).
type countingHook struct{ dials, scripts atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h *countingHook) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.scripts.Add(1)
	}
}

// TestRefusedConnectionEndsTheDecisionAtOnce: a decision against a port where nothing
// listens fails with the refused connection as soon as the first attempt is refused. It
// waited for its deadline: go-redis dials on a goroutine of its own and, refused, tries
// again after DialerRetryTimeout (100 ms by default, 10 s here, so that a loaded machine
// cannot blur the two), while the caller waits for a connection; so every request paid
// the store's whole timeout while Redis was down, and was told "deadline exceeded".
func TestRefusedConnectionEndsTheDecisionAtOnce(t *testing.T) {
	for _, ctxClient := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxClient), func(t *testing.T) {
			addr := closedAddr(t)
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: ctxClient, DialerRetryTimeout: 10 * time.Second})
			t.Cleanup(func() { c.Close() })
			// go-redis's second attempt would come after the store's deadline.
			s := redisstore.New(c, redisstore.WithTimeout(3*time.Second))
			q := core.Query{Policy: mustParse("3/1m"), Key: "k"}
			_, err := s.Decide(context.Background(), q)
			if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
				t.Fatalf("decision against %s where nothing listens: %v; want the refused connection, not the deadline", addr, err)
			}
		})
	}
}

// TestRefusedServerIsNotAskedDuringThePause: once a connection to the server was refused,
// decisions fail at once with that refusal and are not sent, until the pause ends or a
// connection is made; then one is sent, and finds the server back. They were each sent,
// and each made go-redis dial again and log a line when its attempts ran out.
func TestRefusedServerIsNotAskedDuringThePause(t *testing.T) {
	needRedis(t)
	own := ownServer(t)
	own.Stop()
	// One attempt per dial: go-redis's own later attempts could otherwise find the server
	// back before the test says so.
	c := redis.NewClient(&redis.Options{Addr: own.Addr(), DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	h := &countingHook{}
	c.AddHook(h)
	s := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)))
	redisstore.SetRefusedPause(s, time.Hour)
	q := core.Query{Policy: mustParse("3/1m"), Key: "k"}
	refused := func(what string) {
		t.Helper()
		_, err := s.Decide(context.Background(), q)
		if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want the refused connection", what, err)
		}
	}
	refused("first decision")
	// The first decision's send may still be under way in go-redis (a flight sends it, for
	// this client), whose attempt can follow the refusal: counted from when it is done.
	for i := 0; !s.QueueIdle(); i++ {
		if i == 500 {
			t.Fatal("the first decision's send did not end within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sent, dials := h.scripts.Load(), h.dials.Load()
	for i := range 5 {
		refused(fmt.Sprintf("decision %d", i+2))
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	refused("during the pause, the server back")
	if n, d := h.scripts.Load()-sent, h.dials.Load()-dials; n != 0 || d != 0 {
		t.Fatalf("during the pause: %d script calls sent, %d connection attempts; want none", n, d)
	}
	redisstore.SetRefusedPause(s, 0)
	for i := range 3 {
		if d, err := s.Decide(context.Background(), q); err != nil || !d.Allowed {
			t.Fatalf("after the pause, decision %d: %+v %v, want admitted by the server", i+1, d, err)
		}
	}
	if n := h.scripts.Load() - sent; n < 3 {
		t.Errorf("after the pause: %d script calls sent for 3 decisions", n)
	}
}

// countingLogger counts go-redis's log lines.
type countingLogger struct{ n atomic.Int64 }

func (l *countingLogger) Printf(context.Context, string, ...any) { l.n.Add(1) }

// BenchmarkDecideRefused times decisions against a loopback port nobody listens on, under
// the default 100 ms timeout: what each request pays while Redis is down. Sequential
// decisions come every 10 ms (the pause is not timed), as requests do, so that a run of
// 300 spans several seconds of an outage; parallel ones as fast as they can. It reports
// the slowest decision (max-ms) and the lines go-redis logged per decision (golines/op),
// counted a second after the last, when its dials have given up.
func BenchmarkDecideRefused(b *testing.B) {
	for _, ctxClient := range []bool{false, true} {
		for _, par := range []bool{false, true} {
			b.Run(fmt.Sprintf("ContextTimeoutEnabled=%v/parallel=%v", ctxClient, par), func(b *testing.B) {
				logs := &countingLogger{}
				redis.SetLogger(logs)
				defer logging.Enable()
				c := redis.NewClient(&redis.Options{Addr: closedAddr(b), ContextTimeoutEnabled: ctxClient})
				defer c.Close()
				s := redisstore.New(c, roomy)
				q := core.Query{Policy: mustParse("3/1m"), Key: "k"}
				var slowest atomic.Int64
				decide := func() {
					start := time.Now()
					_, err := s.Decide(context.Background(), q)
					took := int64(time.Since(start))
					for old := slowest.Load(); took > old && !slowest.CompareAndSwap(old, took); old = slowest.Load() {
					}
					if err == nil {
						b.Error("decided against a closed port")
					}
				}
				b.ResetTimer()
				if par {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							decide()
						}
					})
				} else {
					for range b.N {
						b.StopTimer()
						time.Sleep(10 * time.Millisecond)
						b.StartTimer()
						decide()
					}
				}
				b.StopTimer()
				time.Sleep(time.Second)
				b.ReportMetric(float64(slowest.Load())/1e6, "max-ms")
				b.ReportMetric(float64(logs.n.Load())/float64(b.N), "golines/op")
			})
		}
	}
}
