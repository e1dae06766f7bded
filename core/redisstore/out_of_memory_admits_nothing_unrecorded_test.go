package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/bounds"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// TestOutOfMemoryServerAdmitsNothingUnrecorded runs the store on a server with a tiny
// maxmemory and noeviction, the only policy under which Redis never drops a grant, and
// fills its memory. A decision that must record a grant then fails with Redis's OOM error
// instead of admitting: the script writes nothing, so nothing is admitted unrecorded. An
// exact rate's refusal, which writes nothing, is still answered; a bounded rate's, which
// records its time, fails. A limit failing closed refuses. Once memory is freed, the same
// store admits again.
func TestOutOfMemoryServerAdmitsNothingUnrecorded(t *testing.T) {
	needRedis(t)
	own, err := redistest.StartServer(tmpRoot, false, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Stop)
	ctx := context.Background()
	c := newClient(t, own)
	store := redisstore.New(c, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithDenyCache(false))
	p := mustParse("3/1m")
	full := core.Query{Policy: p, Key: "full"}
	for i := range 3 {
		if d, err := store.Decide(ctx, full); err != nil || !d.Allowed {
			t.Fatalf("grant %d before memory is full: %+v %v", i+1, d, err)
		}
	}
	bounded := core.Query{Policy: mustPolicy(core.Rate{Count: bounds.LargestExact + 1, Period: time.Minute}), Key: "full", Cost: bounds.LargestExact + 1}
	if d, err := store.Decide(ctx, bounded); err != nil || !d.Allowed {
		t.Fatalf("a bounded rate's whole quota before memory is full: %+v %v", d, err)
	}
	// Fill memory well past the limit in one write (a tiny command that makes an 8 MB
	// value, accepted while memory was under it): Redis counts clients' buffers as used
	// memory, so had it been filled only to the limit, a buffer freed later could let
	// the next write through.
	if err := c.SetRange(ctx, "filler", 8<<20, "x").Err(); err != nil {
		t.Fatalf("filling memory: %v", err)
	}
	if err := c.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
		t.Fatalf("a write with memory full: %v, want an OOM error", err)
	}

	for _, key := range []string{"new", "other"} {
		d, err := store.Decide(ctx, core.Query{Policy: p, Key: key})
		if err == nil || d.Allowed {
			t.Fatalf("key %s with memory full: %+v %v, want an OOM error and no admission", key, d, err)
		}
		if !strings.Contains(err.Error(), "OOM") || !strings.Contains(err.Error(), store.Key(p, "", key)) {
			t.Fatalf("key %s with memory full: error %q, want Redis's OOM error and the key", key, err)
		}
		if n, err := c.Exists(ctx, store.Key(p, "", key)).Result(); err != nil || n != 0 {
			t.Fatalf("key %s: EXISTS %d %v after the failed decision: a partial write", key, n, err)
		}
	}
	// An exact rate's refusal records nothing, so it needs no memory and is still answered.
	if d, err := store.Decide(ctx, full); err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("a spent key with memory full: %+v %v, want refused", d, err)
	}
	// A bounded rate records each decision's time, refusals included: they fail too.
	bounded.Cost = 1
	if d, err := store.Decide(ctx, bounded); err == nil || d.Allowed || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a spent bounded key with memory full: %+v %v, want an OOM error", d, err)
	}

	var hooked []error
	l, err := adapter.New(3, time.Minute, core.WithStore(store), core.WithFailMode(core.FailClosed),
		core.WithErrorHook(func(_ context.Context, err error) { hooked = append(hooked, err) }))
	if err != nil {
		t.Fatal(err)
	}
	in := adapter.Input{Route: "/r", Peer: "192.0.2.9:1234"}
	if v := l.Check(ctx, in, nil); v.Allowed || v.Status != 503 || v.Err == nil || !strings.Contains(v.Err.Error(), "OOM") {
		t.Fatalf("Limiter failing closed, memory full: allow %v status %d err %v; want refused with 503 and the OOM error", v.Allowed, v.Status, v.Err)
	}
	if len(hooked) != 1 {
		t.Fatalf("error hook heard %d errors, want 1", len(hooked))
	}

	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := store.Decide(ctx, core.Query{Policy: p, Key: "new"}); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("memory freed: %+v %v, want the first grant", d, err)
	}
	if v := l.Check(ctx, in, nil); !v.Allowed || v.Err != nil {
		t.Fatalf("Limiter, memory freed: allow %v err %v, want admitted", v.Allowed, v.Err)
	}
}
