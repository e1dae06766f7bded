package redisstore

import (
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

func TestDenyCacheBounded(t *testing.T) {
	c := newDenyCache(64)
	now := time.Now()
	for i := range 10_000 {
		h := [16]byte{byte(i), byte(i >> 8), byte(i >> 16)}
		c.put(h, 0, 1, now, time.Hour, core.Decision{RetryAfter: time.Hour})
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	if n > 64 {
		t.Fatalf("%d entries after 10,000 refused keys, cap 64", n)
	}
}

func TestDenyCacheAges(t *testing.T) {
	c := newDenyCache(defaultDenyCap)
	h := [16]byte{1}
	t0 := time.Now()
	c.put(h, 0, 1, t0, 100*time.Millisecond, core.Decision{RetryAfter: 100 * time.Millisecond, Reset: time.Second, FullReset: time.Second})
	d, ok := c.get(h, 1, t0.Add(30*time.Millisecond))
	if !ok || d.RetryAfter != 70*time.Millisecond || d.Reset != 970*time.Millisecond || d.FullReset != 970*time.Millisecond {
		t.Fatalf("after 30ms: %+v %v, want RetryAfter 70ms, Reset 970ms", d, ok)
	}
	if _, ok := c.get(h, 2, t0.Add(30*time.Millisecond)); ok {
		t.Fatal("a refusal for cost 1 answered a query of cost 2")
	}
	if _, ok := c.get(h, 1, t0.Add(100*time.Millisecond)); ok {
		t.Fatal("refused locally once the wait had passed")
	}
	if _, ok := c.shards[h[0]%denyShards].m[h]; ok {
		t.Fatal("an expired entry was kept after it was read")
	}
}

func TestNoScriptWithOrWithoutERR(t *testing.T) {
	for msg, want := range map[string]bool{
		"NOSCRIPT No matching script. Please use EVAL.":     true,
		"ERR NOSCRIPT No matching script. Please use EVAL.": true,
		"ERR unknown command":                               false,
		"dial tcp: connection refused":                      false,
	} {
		if got := hasPrefix(errString(msg), "NOSCRIPT"); got != want {
			t.Errorf("hasPrefix(%q, `NOSCRIPT`) = %v, want %v", msg, got, want)
		}
	}
	if hasPrefix(nil, "NOSCRIPT") {
		t.Error("hasPrefix(nil, `NOSCRIPT`) = true")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// A refusal whose reply comes after a reset or release of its key is not cached: it may
// have been decided before. A reset or release of another key leaves it cached, even in
// the same shard: the releases of a busy limit must not turn the cache off.
func TestDenyCacheIgnoresRefusalsFromBeforeAForget(t *testing.T) {
	c := newDenyCache(defaultDenyCap)
	h, other := [16]byte{1}, [16]byte{1, 1} // the same shard
	now := time.Now()
	gen := c.gen(h).Load()
	c.forget(h)
	c.put(h, gen, 1, now, time.Hour, core.Decision{RetryAfter: time.Hour})
	if _, ok := c.get(h, 1, now); ok {
		t.Fatal("a refusal read before a forget was cached after it")
	}
	gen = c.gen(h).Load()
	c.forget(other)
	c.put(h, gen, 1, now, time.Hour, core.Decision{RetryAfter: time.Hour})
	if _, ok := c.get(h, 1, now); !ok {
		t.Fatal("a refusal was not cached because another key of its shard was released meanwhile")
	}
}
