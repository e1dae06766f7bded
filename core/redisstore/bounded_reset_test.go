package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// Decision.Reset (the RateLimit field's t) of a bucketed rate is when the oldest bucket
// that holds a grant leaves, and the quota grows then; the scripts reported when the
// window's oldest bucket left, empty or not: a key whose grants were all recent was told
// at most T/100.
func TestBucketedResetIsTheOldestGrants(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)),
		redisstore.WithClock(clock.Now), redisstore.WithDenyCache(false))
	q := core.Query{Policy: mustParse("300/1h"), Key: "k", Cost: 300}
	d, err := s.Decide(ctx, q) // the whole quota at once
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	clock.Advance(d.Reset)
	one := q
	one.Cost = 1
	if e, _ := s.Decide(ctx, one); !e.Allowed {
		t.Fatalf("admitted with Remaining %d and Reset %v; %v later a request is refused for %v more: the oldest grant had not left (%+v)",
			d.Remaining, d.Reset, d.Reset, e.RetryAfter, e)
	}
}
