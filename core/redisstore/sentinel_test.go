package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// TestSentinel runs decisions through a Sentinel failover client, built as a
// UniversalClient the way applications usually build it, across a failover: a grant made
// on the master must still count once Sentinel has promoted its replica, whose script
// cache is empty (so the script is sent again).
func TestSentinel(t *testing.T) {
	needRedis(t)
	master, replica := ownServer(t), ownServer(t)
	ctx := context.Background()
	rc := newClient(t, replica)
	if err := rc.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(master.Port)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica to sync", func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	sentinel, err := redistest.StartSentinel(t.TempDir(), "rl", master.Port)
	if sentinel != nil {
		t.Cleanup(sentinel.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	addr := sentinel.Addr()
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	masterIs := func(port int) func() bool {
		return func() bool {
			a, err := sc.GetMasterAddrByName(ctx, "rl").Result()
			return err == nil && len(a) == 2 && a[1] == strconv.Itoa(port)
		}
	}
	waitFor(t, "sentinel to know the master", masterIs(master.Port))
	waitFor(t, "sentinel to know the replica", func() bool {
		r, err := sc.Replicas(ctx, "rl").Result()
		return err == nil && len(r) == 1
	})
	c := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "rl", Addrs: []string{addr}})
	defer c.Close()
	if _, ok := c.(*redis.Client); !ok {
		t.Fatalf("UniversalClient with MasterName is %T, want the failover *redis.Client", c)
	}
	s := redisstore.New(c, roomy)
	q := core.Query{Policy: mustParse("3/1h"), Key: "k"}
	if d, err := s.Decide(ctx, q); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("request 1 through Sentinel: %+v %v, want admitted, 2 left", d, err)
	}
	// The grant must reach the replica before it is promoted (replication is asynchronous:
	// a grant lost in a failover is the price of Redis's replication, not the store's).
	if n, err := newClient(t, master).Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d %v", n, err)
	}
	// Sentinel answers NOGOODSLAVE until it has heard from the replica itself.
	waitFor(t, "sentinel to start the failover", func() bool { return sc.Failover(ctx, "rl").Err() == nil })
	waitFor(t, "the replica to be promoted", masterIs(replica.Port))
	// Until Sentinel demotes the old master, a client may still write there (Redis's own
	// window, as with any client); the test wants the decisions on the new master.
	mc := newClient(t, master)
	waitFor(t, "the old master to be demoted", func() bool {
		info, _ := mc.Info(ctx, "replication").Result()
		return strings.Contains(info, "role:slave")
	})
	var d core.Decision
	waitFor(t, "a decision on the new master", func() bool {
		d, err = s.Decide(ctx, q)
		return err == nil
	})
	if !d.Allowed || d.Remaining != 1 {
		t.Fatalf("request 2, on the promoted replica: %+v, want admitted with 1 left (request 1 still counts)", d)
	}
	for i, want := range []bool{true, false} {
		d, err := s.Decide(ctx, q)
		if err != nil || d.Allowed != want {
			t.Fatalf("request %d after the failover: %+v %v, want allowed=%v", i+3, d, err, want)
		}
	}
	// The promoted replica had no script: the store must have sent its text.
	info, err := rc.Info(ctx, "commandstats").Result()
	if err != nil || !strings.Contains(info, "cmdstat_eval:calls=") {
		t.Fatalf("the new master never ran EVAL (%v): the script was not sent again\n%s", err, info)
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
