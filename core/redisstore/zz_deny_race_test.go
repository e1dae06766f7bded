package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

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

// Store.Reset and Store.Release promise that "this process forgets its cached refusal of the
// key too", and drop the entry before and after their script. A refusal the server decided
// before the reset (or release) but that the store caches after it returns is not caught:
// the deny cache then refuses the key locally for the refusal's whole wait (an hour here)
// although Redis, after the reset, would admit. A Quota.Reset meant to unlock a client (after
// a password reset) is then silently void in this process, and a WithCountWhen give-back
// is lost for the whole wait.
func TestZZDenyCacheOutlivesResetAndRelease(t *testing.T) {
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
