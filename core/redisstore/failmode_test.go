package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestFailModesWithRedisDown runs a Limiter of 3/1m on the Redis store through a server
// that stops mid-run and comes back, under each fail mode: while it is down, each request
// gets its mode's answer within the deadline and the error hook hears of it; once it is
// back (empty: no persistence), the same Limiter enforces 3/1m through Redis again.
//
// The 100 ms deadline under test holds while the server is down. While it is up, the
// Limiter decides through a store with a roomy deadline on the same client and keys: a
// loaded machine that stalls a round trip past 100 ms would otherwise turn a grant the
// test counts on into a store failure, and one that Redis recorded after the store gave
// up on it would leave the counts one off.
func TestFailModesWithRedisDown(t *testing.T) {
	needRedis(t)
	const timeout = 100 * time.Millisecond
	cases := []struct {
		name    string
		opts    []core.Option
		allowed []bool // the four requests while Redis is down
		status  int    // of those refused
	}{
		{"FailOpen", []core.Option{core.WithFailMode(core.FailOpen)}, []bool{true, true, true, true}, 0},
		{"FailClosed", []core.Option{core.WithFailMode(core.FailClosed)}, []bool{false, false, false, false}, 503},
		{"FailClosed429", []core.Option{core.WithFailMode(core.FailClosed), core.WithFailStatus(429)}, []bool{false, false, false, false}, 429},
		{"FailLocal", []core.Option{core.WithFailMode(core.FailLocal)}, []bool{true, true, true, false}, 429},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			own := ownServer(t)
			client := newClient(t, own)
			store := redisstore.New(client, redisstore.WithTimeout(timeout))
			warmUp(t, store, core.Query{Policy: mustParse("3/1m"), Key: "warm"})
			up := &switchStore{}
			up.use(redisstore.New(client, roomy))
			var hooked atomic.Int64
			opts := append([]core.Option{core.WithStore(up), core.WithErrorHook(func(context.Context, error) { hooked.Add(1) })}, c.opts...)
			l, err := adapter.New(3, time.Minute, opts...)
			if err != nil {
				t.Fatal(err)
			}
			in := adapter.Input{Route: "/r", Peer: "192.0.2.7:1234"}
			// check sends a request; down means the server is, and the answer is the fail
			// mode's, with an error, within the deadline.
			check := func(what string, allow bool, status int, down bool) {
				t.Helper()
				// Not run again when late: each request counts, in Redis or locally.
				m := startStallMeter()
				start := time.Now()
				v := l.Check(context.Background(), in, nil)
				el := time.Since(start)
				if stall := m.Stop(); down && el > timeout+100*time.Millisecond+stall {
					t.Errorf("%s: took %v, deadline %v plus 100ms and the machine's delay %v", what, el, timeout, stall)
				}
				if v.Allowed != allow || (!allow && v.Status != status) || (v.Err != nil) != down {
					t.Fatalf("%s: allow %v status %d err %v; want allow %v status %d, error %v", what, v.Allowed, v.Status, v.Err, allow, status, down)
				}
			}
			check("up, request 1", true, 0, false)
			check("up, request 2", true, 0, false)
			roomyStore := up.use(store)
			own.Stop()
			for i, allow := range c.allowed {
				check("down, request "+strconv.Itoa(i+1), allow, c.status, true)
			}
			if n := hooked.Load(); n != int64(len(c.allowed)) {
				t.Errorf("error hook called %d times while down, want %d", n, len(c.allowed))
			}
			if err := own.Start(); err != nil {
				t.Fatal(err)
			}
			up.use(roomyStore)
			deadline := time.Now().Add(5 * time.Second)
			for l.Check(context.Background(), in, nil).Err != nil {
				if time.Now().After(deadline) {
					t.Fatal("decisions did not resume within 5 s of the restart")
				}
				time.Sleep(20 * time.Millisecond)
			}
			// That first answer was a grant on the empty server: two more, then 429 from Redis.
			check("back, request 2", true, 0, false)
			check("back, request 3", true, 0, false)
			check("back, request 4", false, 429, false)
		})
	}
}

// A switchStore decides through the store it was last given, so that one Limiter can
// change stores between its requests.
type switchStore struct {
	cur atomic.Pointer[redisstore.Store]
}

// use makes s decide through st from now on, and returns the store it decided through.
func (s *switchStore) use(st *redisstore.Store) *redisstore.Store { return s.cur.Swap(st) }

// Decide implements core.Store.
func (s *switchStore) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	return s.cur.Load().Decide(ctx, q)
}
