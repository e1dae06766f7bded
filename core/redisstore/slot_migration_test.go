package redisstore_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	nodes, cc, s := migrationCluster(t)
	ctx := context.Background()
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

	from, dst, slot, ids := migrating(t, nodes, cc, key)
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
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
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		do(c, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst.Options().Addr])
		c.Close()
	}
	burst(80) // the slot moved: MOVED, then the new map
	if got := admitted.Load(); got != 200 || failed.Load() > 0 {
		t.Fatalf("%d admitted and %d failed under 200/1h while the key's slot moved: want 200 admitted, none failed", got, failed.Load())
	}
}

// A give-back or a reset of a key whose slot is migrating, while the key is still at the
// old master, met TRYAGAIN: the server refuses a script of several keys (the key and its
// reset fence) until all of them are on one side. go-redis tried again, and then met
// MOVED once the slot had moved, which it did not follow: the give-back failed, and its
// grant stayed counted. A refused script ran nothing, so it is sent again, within the
// store's deadline, once the keys have moved.
func TestReleaseDuringASlotMigrationWaitsForTheKeysToMove(t *testing.T) {
	for _, c := range []struct {
		name string
		op   func(s *redisstore.Store, q core.Query, grant int64) error
		left int
	}{
		{"release", func(s *redisstore.Store, q core.Query, grant int64) error {
			return s.Release(context.Background(), q, grant)
		}, 3},
		{"reset", func(s *redisstore.Store, q core.Query, _ int64) error { return s.Reset(context.Background(), q) }, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes, cc, s := migrationCluster(t)
			ctx := context.Background()
			p := mustParse("5/1h")
			q := core.Query{Policy: p, Key: "alice"}
			key := s.Key(p, "", "alice")
			var grant int64
			for range 3 {
				d, err := s.Decide(ctx, q)
				if err != nil || !d.Allowed {
					t.Fatalf("%+v %v", d, err)
				}
				grant = d.Grant
			}
			from, dst, slot, ids := migrating(t, nodes, cc, key)
			moved := make(chan error, 1)
			go func() {
				time.Sleep(100 * time.Millisecond) // the script meets the slot migrating
				host, port, err := net.SplitHostPort(dst.Options().Addr)
				if err == nil {
					err = from.Migrate(ctx, host, port, key, 0, 5*time.Second).Err()
				}
				for _, n := range nodes {
					c := redis.NewClient(&redis.Options{Addr: n.Addr()})
					if err == nil {
						err = c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst.Options().Addr]).Err()
					}
					c.Close()
				}
				moved <- err
			}()
			err := c.op(s, q, grant)
			if err := <-moved; err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatalf("%s while the key's slot migrated: %v", c.name, err)
			}
			q.Mode = core.Peek
			if d, err := s.Decide(ctx, q); err != nil || d.Remaining != c.left {
				t.Fatalf("after 3 grants and a %s under 5/1h: %+v %v, want %d left", c.name, d, err, c.left)
			}
		})
	}
}

// migrationCluster starts a 3-master cluster and a store on it without the deny cache, so
// that every decision reaches the key wherever its slot is.
func migrationCluster(t *testing.T) ([]*redistest.Server, *redis.ClusterClient, *redisstore.Store) {
	t.Helper()
	needRedis(t)
	nodes := redistest.Cluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(nodes), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	return nodes, cc, redisstore.New(cc, roomy, redisstore.WithDenyCache(false))
}

// migrating starts moving key's slot from its master to another (CLUSTER SETSLOT
// IMPORTING, MIGRATING), and returns the source's and target's clients, the slot and the
// nodes' IDs by address.
func migrating(t *testing.T, nodes []*redistest.Server, cc *redis.ClusterClient, key string) (from, dst *redis.Client, slot int64, ids map[string]string) {
	t.Helper()
	ctx := context.Background()
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ids = map[string]string{}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		t.Cleanup(func() { c.Close() })
		if ids[n.Addr()], err = c.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
			t.Fatal(err)
		}
		switch {
		case n.Addr() == src.Options().Addr:
			from = c
		case dst == nil:
			dst = c
		}
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from.Options().Addr]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := from.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst.Options().Addr]).Err(); err != nil {
		t.Fatal(err)
	}
	return from, dst, slot, ids
}
