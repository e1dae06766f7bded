package core

import (
	"context"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
	"unsafe"
)

// DefaultMaxKeys is the number of keys a MemoryStore holds unless told otherwise: about
// 70 MB for a 3-per-minute policy (67 bytes a key, measured: see docs/performance.md).
const DefaultMaxKeys = 1 << 20

// DefaultSweepInterval is how often a MemoryStore shard drops idle keys unless told otherwise.
const DefaultSweepInterval = time.Minute

const shardCount = 64

// MemoryStore is the in-process Store: exact, lock-sharded, allocation-free per decision for
// keys it already holds, and bounded in size. Its zero value is not usable; call
// NewMemoryStore. It runs no goroutine: idle keys are swept by the shard that holds them,
// during later decisions, so there is nothing to close.
//
// # At the key cap
//
// When the store holds MaxKeys keys and a new key arrives, the shard first drops its idle
// keys (which never changes a decision). If it is still full, the new key is decided in
// the shared overflow bucket of its policy and scope: every newcomer that finds the store
// full shares one quota there, so none of them can exceed its limit, and live keys are never
// evicted to make room, so none of them can either. A flood of distinct clients therefore
// costs memory up to the cap and then only throttles other newcomers.
type MemoryStore struct {
	shards      [shardCount]shard
	seedKey     maphash.Seed
	seedScope   maphash.Seed
	clock       Clock
	epoch       time.Time
	shardCap    int
	sweepEvery  int64
	maxKeysOpts int
}

type shard struct {
	mu        sync.Mutex
	m         map[uint64]bucket
	lastSweep int64
	_         [40]byte // keeps neighbouring shards' locks off one cache line
}

// A bucket is one key's state: its policy and the first of p.StateLen() int64 slots.
// Keys are 64-bit seeded hashes of (policy, scope, key); two distinct keys share a bucket
// with probability about n²/2⁶⁵ for n keys (3·10⁻⁸ at a million), and sharing only ever
// makes a limit stricter.
type bucket struct {
	p *Policy
	s *int64
}

// A MemoryOption configures a MemoryStore.
type MemoryOption func(*MemoryStore)

// WithClock makes the store read time from c instead of the system's monotonic clock.
func WithClock(c Clock) MemoryOption { return func(m *MemoryStore) { m.clock = c } }

// WithMaxKeys caps the number of keys held (default DefaultMaxKeys); n < 1 means the default.
// See "At the key cap" in MemoryStore's documentation.
func WithMaxKeys(n int) MemoryOption { return func(m *MemoryStore) { m.maxKeysOpts = n } }

// WithSweepInterval sets how often each shard drops idle keys (default DefaultSweepInterval).
func WithSweepInterval(d time.Duration) MemoryOption {
	return func(m *MemoryStore) { m.sweepEvery = int64(d) }
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	m := &MemoryStore{
		seedKey:    maphash.MakeSeed(),
		seedScope:  maphash.MakeSeed(),
		epoch:      time.Now(),
		sweepEvery: int64(DefaultSweepInterval),
	}
	for _, o := range opts {
		o(m)
	}
	if m.clock != nil {
		m.epoch = m.clock.Now()
	}
	if m.maxKeysOpts < 1 {
		m.maxKeysOpts = DefaultMaxKeys
	}
	m.shardCap = max(1, (m.maxKeysOpts+shardCount-1)/shardCount)
	for i := range m.shards {
		m.shards[i].m = make(map[uint64]bucket)
	}
	return m
}

// now returns nanoseconds since the store's epoch. Without an injected clock it reads only
// the monotonic clock, which is cheaper than time.Now and never jumps.
func (m *MemoryStore) now() int64 {
	if m.clock != nil {
		return int64(m.clock.Now().Sub(m.epoch))
	}
	return int64(time.Since(m.epoch))
}

func (m *MemoryStore) hash(p *Policy, scope, key string) uint64 {
	return maphash.String(m.seedKey, key) ^ bits.RotateLeft64(maphash.String(m.seedScope, scope), 29) ^ p.salt
}

// Decide implements Store. It fails only for a nil policy or a cost above the limit.
func (m *MemoryStore) Decide(_ context.Context, q Query) (Decision, error) {
	return m.DecideAt(q, m.now())
}

// DecideAt decides q at now, in nanoseconds since the store was created (or since the
// injected clock's first reading). It is Decide with the time made explicit, for
// simulations that drive many decisions without a clock.
func (m *MemoryStore) DecideAt(q Query, now int64) (Decision, error) {
	p := q.Policy
	if p == nil {
		return Decision{}, errNilPolicy
	}
	h := m.hash(p, q.Scope, q.Key)
	sh := &m.shards[h>>(64-6)]
	sh.mu.Lock()
	b, ok := sh.m[h]
	switch {
	case !ok:
		b = sh.insert(m, h, p, q.Scope, now)
	case b.p != p && b.p.text != p.text:
		// A 64-bit hash collision with another policy's key: never overwrite a live key.
		b = m.overflow(sh, p, q.Scope)
	}
	d, err := p.Apply(unsafe.Slice(b.s, p.stateLen), now, q.Cost, q.Mode)
	if now-sh.lastSweep >= m.sweepEvery {
		sh.sweep(now)
	}
	sh.mu.Unlock()
	return d, err
}

// insert makes room for and adds a new key, or returns the overflow bucket when full.
func (sh *shard) insert(m *MemoryStore, h uint64, p *Policy, scope string, now int64) bucket {
	if len(sh.m) >= m.shardCap {
		sh.sweep(now)
		if len(sh.m) >= m.shardCap {
			return m.overflow(sh, p, scope)
		}
	}
	b := bucket{p: p, s: &p.NewState()[0]}
	sh.m[h] = b
	return b
}

// overflow returns the bucket newcomers share when the store is full. It lives in the same
// shard map under a hash no ordinary key can produce on purpose, beyond the cap.
func (m *MemoryStore) overflow(sh *shard, p *Policy, scope string) bucket {
	h := m.hash(p, scope, "\x00reqlimit overflow\x00")
	b, ok := sh.m[h]
	if !ok {
		b = bucket{p: p, s: &p.NewState()[0]}
		sh.m[h] = b
	}
	return b
}

// sweep drops the shard's idle keys.
func (sh *shard) sweep(now int64) {
	for h, b := range sh.m {
		if b.p.Idle(unsafe.Slice(b.s, b.p.stateLen), now) {
			delete(sh.m, h)
		}
	}
	sh.lastSweep = now
}

// Len returns the number of keys the store holds, idle ones not yet swept included.
func (m *MemoryStore) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Sweep drops every idle key now, rather than waiting for the shards to do it.
func (m *MemoryStore) Sweep() {
	now := m.now()
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		sh.sweep(now)
		sh.mu.Unlock()
	}
}
