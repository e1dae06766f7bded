package redisstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

const (
	denyShards = 16
	denyGens   = 1024
	// defaultDenyCap bounds the deny cache: a flood of distinct refused keys costs at most
	// this many small entries, never unbounded memory.
	defaultDenyCap = 1 << 16
)

// denyCache remembers the refusals Redis gave to Enforce and Penalty queries, and answers
// Enforce and Peek queries of the same key and cost with them until the wait Redis gave
// has passed. It only ever refuses, and never past the moment Redis would admit, so it
// cannot make a limit looser or stricter than Redis's answer, only cheaper.
type denyCache struct {
	shards   [denyShards]denyShard
	perShard int
	// gens count the resets and releases of keys, by ten bits of the hash: a refusal
	// decided before one of them whose reply comes after it is not cached, since Redis
	// would no longer give it. Finer than a shard, so that a busy limit's releases
	// (WithCountWhen gives back every request it does not count) spare other keys'.
	gens [denyGens]atomic.Uint64
}

type denyShard struct {
	mu sync.Mutex
	m  map[[16]byte]denyEntry
}

type denyEntry struct {
	since time.Time // local monotonic time the request was sent
	until time.Time // since + the wait until admission
	cost  int
	d     core.Decision
}

func newDenyCache(capacity int) *denyCache {
	c := &denyCache{perShard: max(1, capacity/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[[16]byte]denyEntry)
	}
	return c
}

// get returns the cached refusal of key h for a request of this cost, aged to now.
func (c *denyCache) get(h [16]byte, cost int, now time.Time) (core.Decision, bool) {
	sh := &c.shards[h[0]%denyShards]
	sh.mu.Lock()
	e, ok := sh.m[h]
	if ok && !now.Before(e.until) {
		delete(sh.m, h)
		ok = false
	}
	sh.mu.Unlock()
	// A refusal for one cost says nothing exact about another: ask Redis.
	if !ok || e.cost != cost {
		return core.Decision{}, false
	}
	age := now.Sub(e.since)
	d := e.d
	d.RetryAfter = max(0, d.RetryAfter-age)
	d.Reset = max(0, d.Reset-age)
	d.FullReset = max(0, d.FullReset-age)
	return d, true
}

// gen returns the counter of h's resets and releases (see gens), chosen by other bits than
// its shard: Decide reads it before it sends, put compares it.
func (c *denyCache) gen(h [16]byte) *atomic.Uint64 {
	return &c.gens[(int(h[1])<<8|int(h[2]))%denyGens]
}

// put records a refusal whose admission is wait away, unless a reset or release of a key
// sharing h's generation came after gen was read; a full shard drops expired entries, and
// others while it is full.
func (c *denyCache) put(h [16]byte, gen uint64, cost int, since time.Time, wait time.Duration, d core.Decision) {
	sh := &c.shards[h[0]%denyShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.gen(h).Load() != gen {
		return
	}
	if _, ok := sh.m[h]; !ok && len(sh.m) >= c.perShard {
		for k, e := range sh.m {
			if !since.Before(e.until) || len(sh.m) >= c.perShard {
				delete(sh.m, k)
			}
		}
	}
	sh.m[h] = denyEntry{since: since, until: since.Add(wait), cost: cost, d: d}
}

func (c *denyCache) drop(h [16]byte) {
	sh := &c.shards[h[0]%denyShards]
	sh.mu.Lock()
	delete(sh.m, h)
	sh.mu.Unlock()
}

// forget forgets key h's refusal once a reset or release of it has run, and every refusal
// of a key sharing its generation still on its way: one decided before, whose reply comes
// after.
func (c *denyCache) forget(h [16]byte) {
	c.gen(h).Add(1) // first: a put after it fails, one before it is dropped
	c.drop(h)
}
