package redisstore_test

import (
	"context"
	"testing"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// Quota.Reset ("forgets every grant of key") on one instance does not reach the deny cache of
// the others: an instance that had refused the key keeps refusing it locally for the whole
// wait it cached (up to the period: 15 minutes for the README's login limit), although Redis
// holds nothing for the key. Store.Reset's comment admits it ("another process's cached
// refusal lasts until its wait ends"), but docs/redis.md's deny cache section says "only
// time frees a slot" and "It is exact for Enforce", and Quota.Reset says nothing of it.
func TestZZResetDoesNotReachOtherProcessesDenyCache(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	prefix := freshPrefix(t)
	a := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix)) // instance A
	b := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(prefix)) // instance B
	q := core.Query{Policy: mustParse("5/15m"), Scope: "login", Key: "alice"}
	for i := range 6 {
		d, err := a.Decide(ctx, q)
		if err != nil || d.Allowed != (i < 5) {
			t.Fatalf("request %d: %+v %v", i+1, d, err)
		}
	}
	if err := b.Reset(ctx, q); err != nil { // the operator unlocks alice through instance B
		t.Fatal(err)
	}
	if d, err := b.Decide(ctx, core.Query{Policy: q.Policy, Scope: q.Scope, Key: q.Key, Mode: core.Peek}); err != nil || !d.Allowed || d.Remaining != 5 {
		t.Fatalf("Redis after the reset: %+v %v", d, err)
	}
	if d, err := a.Decide(ctx, q); err != nil || !d.Allowed {
		t.Fatalf("instance A after the reset: %+v %v: refused from its deny cache for another %v although Redis holds no grant", d, err, d.RetryAfter)
	}
}
