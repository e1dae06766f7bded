package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// TestFindingAClusterMastersQueueAllocatesNothingOfItsOwn checks that a decision on a
// Cluster finds its master's queue without allocating beyond what go-redis's own lookup of
// the master allocates: the queue is made once per master, not offered anew (and dropped)
// by every decision.
func TestFindingAClusterMastersQueueAllocatesNothingOfItsOwn(t *testing.T) {
	needRedis(t)
	c := newClusterClient(t)
	s := redisstore.New(c, roomy)
	p, err := core.NewPolicy(core.Rate{Count: 5, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	q := core.Query{Policy: p, Scope: "/queue", Key: "client", Mode: core.Enforce, Cost: 1}
	if _, err := s.Decide(context.Background(), q); err != nil { // loads the slot map
		t.Fatal(err)
	}
	key := s.Key(p, q.Scope, q.Key)
	done, cancel := context.WithDeadline(context.Background(), time.Time{})
	defer cancel()
	lookup := testing.AllocsPerRun(200, func() {
		if _, err := c.MasterForKey(done, key); err != nil {
			t.Fatal(err)
		}
	})
	first := redisstore.QueueFor(s, key)
	allocs := testing.AllocsPerRun(200, func() {
		if redisstore.QueueFor(s, key) != first {
			t.Fatal("another queue for the same master")
		}
	})
	if allocs > lookup {
		t.Errorf("finding the master's queue allocates %v times, go-redis's lookup of the master %v", allocs, lookup)
	}
}
