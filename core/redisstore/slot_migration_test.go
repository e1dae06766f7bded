package redisstore_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// A key whose slot moves to another master while decisions on it run (CLUSTER SETSLOT
// IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE, as redis-cli --cluster reshard does) keeps
// its grants: the client follows the ASK and MOVED redirections, and the whole run
// admits exactly the count within the window: one more would be a decision made on a
// fresh key at the new master, one fewer a grant recorded twice or lost in a redirection.
func TestKeyMovingSlotsMidRunKeepsItsGrants(t *testing.T) {
	needRedis(t)
	nodes := redistest.Cluster(t, 3)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(nodes), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	s := redisstore.New(cc, roomy, redisstore.WithDenyCache(false))
	p := mustParse("200/1h")
	q := core.Query{Policy: p, Key: "alice"}
	key := s.Key(p, "", "alice")

	var admitted, failed atomic.Int64
	burst := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				d, err := s.Decide(ctx, q)
				switch {
				case err != nil:
					failed.Add(1)
					t.Log(err)
				case d.Allowed:
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
	}
	burst(40)

	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var dst *redis.Client
	clients := map[string]*redis.Client{}
	ids := map[string]string{}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		t.Cleanup(func() { c.Close() })
		clients[n.Addr()] = c
		if ids[n.Addr()], err = c.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
			t.Fatal(err)
		}
		if dst == nil && n.Addr() != src.Options().Addr {
			dst = c
		}
	}
	from := clients[src.Options().Addr]
	srcID, dstID := ids[src.Options().Addr], ids[dst.Options().Addr]
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	burst(40) // while the slot is migrating, its keys still at the source
	keys, err := from.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys in slot %d: %q %v", slot, keys, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { burst(40) }) // while the keys move
	host, port, err := net.SplitHostPort(dst.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		do(from, "MIGRATE", host, port, k, 0, 5000)
	}
	wg.Wait()
	burst(40) // the keys moved, the slot still migrating: ASK
	for _, c := range clients {
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	burst(80) // the slot moved: MOVED, then the new map
	if got := admitted.Load(); got != 200 || failed.Load() > 0 {
		t.Fatalf("%d admitted and %d failed under 200/1h while the key's slot moved: want 200 admitted, none failed", got, failed.Load())
	}
}
