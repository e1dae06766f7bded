package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// "N per T" across a Redis restart: docs/redis.md says what eviction, asynchronous
// replication and outages do, but not that a restart forgets every grant made since the
// last persisted point (with no persistence, as here and in many cache deployments, all of
// them; with the default RDB snapshots, those of the last minutes), so every client gets
// its whole quota again at once. TestFailModesWithRedisDown relies on exactly this ("a
// grant on the empty server") but the user-facing documentation never states it.
// This test records 3 grants of 3/1m, restarts the server, and counts what one minute
// admits: 6, not 3.
func TestZZRestartForgetsGrants(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	own := ownServer(t)
	s := redisstore.New(newClient(t, own), roomy)
	q := core.Query{Policy: mustParse("3/1m"), Scope: "login", Key: "alice"}
	start := time.Now()
	admitted := 0
	for range 3 {
		if d, err := s.Decide(ctx, q); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			admitted++
		}
	}
	own.Stop()
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for range 3 {
		for {
			d, err := s.Decide(ctx, q)
			if err == nil {
				if d.Allowed {
					admitted++
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if el := time.Since(start); el < time.Minute && admitted > 3 {
		t.Fatalf("3/1m: %d admitted within %v across a restart of Redis (grants not persisted are forgotten); docs/redis.md does not say so", admitted, el.Round(time.Millisecond))
	}
}
