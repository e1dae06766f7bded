package redisstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// Decide and Release run under the store's deadline (WithTimeout, default 100 ms): "a paused
// or unreachable server costs at most the deadline". Reset (what Quota.Reset calls, from a
// request handler such as a password reset) sends reset.lua straight through the client
// with only the caller's context, so on a paused server it waits for go-redis's own read
// timeout (3 s) and its retries, or forever with ContextTimeoutEnabled and a context
// without a deadline.
func TestZZResetIgnoresStoreDeadline(t *testing.T) {
	needRedis(t)
	for _, kind := range []string{"plain client", "ContextTimeoutEnabled"} {
		t.Run(kind, func(t *testing.T) {
			srv := ownServer(t)
			var c *redis.Client
			if kind == "plain client" {
				c = newClient(t, srv)
			} else {
				c = newCtxClient(t, srv)
			}
			s := redisstore.New(c, redisstore.WithTimeout(100*time.Millisecond))
			ctx := context.Background()
			q := core.Query{Policy: mustParse("3/1m"), Scope: "login", Key: "alice"}
			if _, err := s.Decide(ctx, q); err != nil {
				t.Fatal(err)
			}
			signal(t, srv, syscall.SIGSTOP)
			defer signal(t, srv, syscall.SIGCONT)

			// Release, for comparison, keeps the deadline.
			start := time.Now()
			err := s.Release(ctx, q, 1)
			t.Logf("Release on a paused server: %v after %v", err, time.Since(start).Round(time.Millisecond))

			done := make(chan error, 1)
			start = time.Now()
			go func() { done <- s.Reset(ctx, q) }()
			select {
			case err := <-done:
				if took := time.Since(start); took > time.Second {
					t.Fatalf("Reset on a paused server returned after %v (%v), want about the store's 100ms deadline", took.Round(time.Millisecond), err)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("Reset on a paused server has not returned after 2s; the store's deadline is 100ms")
			}
		})
	}
}
