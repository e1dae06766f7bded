package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestRequestPastItsDeadlineIsRefusedUnderFailOpen: a request whose own context ends
// before the store answers (its client hung up, or its deadline passed) is refused
// whatever the fail mode (docs/operations.md, "When the store fails"): admitted uncounted,
// any client could skip a limit kept in Redis, and a gRPC client picks its server-side
// deadline (grpc-timeout). Here a 1/1h limit on Redis under FailOpen, the default, has
// spent its slot, and later requests have deadlines from 5 µs up, some ending inside the
// round trip. Those were admitted: the store failed on the deadline (its own timer, or a
// child context made after it passed) while the request context's Err was still nil (its
// timer had not fired yet), and the failure was taken for an outage.
func TestRequestPastItsDeadlineIsRefusedUnderFailOpen(t *testing.T) {
	needRedis(t)
	cases := []struct {
		name      string
		ctxClient bool
		opts      []redisstore.Option
		maxUs     int // deadlines from 5 µs to this
	}{
		// The deny cache off (docs/redis.md's advice where a Quota.Reset must reach every
		// instance): every refused request goes to Redis.
		{"ContextTimeoutEnabled, deny cache off", true, []redisstore.Option{redisstore.WithDenyCache(false)}, 1000},
		{"default client, deny cache off", false, []redisstore.Option{redisstore.WithDenyCache(false)}, 1000},
		// Default options: a refusal Redis answers is cached, but a client whose deadlines
		// all end before Redis answers never gets one.
		{"ContextTimeoutEnabled, default options", true, nil, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, standalone)
			if tc.ctxClient {
				c = newCtxClient(t, standalone)
			}
			store := redisstore.New(c, append([]redisstore.Option{roomy}, tc.opts...)...)
			warmUp(t, store, core.Query{Policy: mustParse("1/1h"), Key: "warm"})
			l, err := adapter.New(1, time.Hour, core.WithStore(store), core.WithScope("deadline-"+tc.name+time.Now().String()))
			if err != nil {
				t.Fatal(err)
			}
			in := adapter.Input{Route: "/r", Peer: "192.0.2.7:1234"}
			if v := l.Check(context.Background(), in, nil); !v.Allowed || v.Err != nil {
				t.Fatalf("first request: allowed %v err %v, want admitted", v.Allowed, v.Err)
			}
			admitted := 0
			const tries = 3000
			for i := range tries {
				// Deadlines from 5 µs up: some end inside the round trip.
				d := time.Duration(5+(i*37)%tc.maxUs) * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), d)
				v := l.Check(ctx, in, nil)
				cancel()
				if v.Allowed {
					if admitted == 0 {
						t.Errorf("request %d (deadline %v) on a spent 1/1h key admitted: %v", i+2, d, v.Err)
					}
					admitted++
				}
			}
			if admitted > 0 {
				t.Errorf("%d of %d requests admitted past a spent 1/1h limit (1 allowed per hour)", admitted, tries)
			}
		})
	}
}
