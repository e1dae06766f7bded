package core

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// shardCount is how many shards hold a policy's keys, by a key hash's top shardBits bits:
// decisions on different keys rarely wait on one another's lock.
const shardBits, shardCount = 6, 1 << shardBits

// MemoryStore is the in-process Store, and the default: exact, allocation-free per
// decision, bounded, with no goroutine to stop. At MaxKeys, newcomers share one bucket per
// policy until idle keys make room: no live key is evicted, so no client exceeds its limit.
type MemoryStore struct {
	keySeed, scopeSeed maphash.Seed
	now                func() int64 // the store's clock: nanoseconds since it was made
	maxKeys            int64
	sweepEvery         int64        // how long a shard waits between sweep passes, in nanoseconds
	keys               atomic.Int64 // keys held; the overflow buckets are not counted

	mu     sync.Mutex
	tables map[string]*keyTable // by policy text: equal policies share a table (Policy.salt keeps limits apart)
	list   []*keyTable          // the same tables in the order made, for the sweep round

	roundMu sync.Mutex // the full store's sweep round (see sweepRound)
	roundAt int        // the table index times shardCount plus the shard index

	sweepHook func(entries int) // for tests: told how many entries each sweep step examines
}

// A keyTable holds the keys of one policy text, every limit's of that text.
type keyTable struct {
	store  *MemoryStore
	policy *Policy
	shards [shardCount]shard

	// overflow is the state every newcomer shares while the store is full: never swept,
	// outside the shards and the key count.
	overflowMu sync.Mutex
	overflow   []int64
}

// A shard holds some of a policy's keys, each by the 64-bit seeded hash of its scope and
// key, salted by its limit (see hash). Two keys of one policy share an entry with
// probability about n²/2⁶⁵ for n keys, and sharing only ever makes a limit stricter.
type shard struct {
	mu sync.Mutex
	// entries holds each key's slots: [0] the time of its latest reset (never if none,
	// see Reset), then the engine's state.
	entries map[uint64][]int64
	order   []uint64 // the hashes in entries, in the order sweeps walk them
	cursor  int      // the index in order the next sweep step starts from

	lastPass  int64 // when the cursor last came round: the periodic sweep waits from then
	lastSweep int64 // the latest time a key was dropped: decisions record no earlier
}

// A MemoryConfig configures a MemoryStore; its zero value means every default.
type MemoryConfig struct {
	MaxKeys int // the keys held at most (see MemoryStore); 0 means 1<<20
	// SweepInterval is how often shards start dropping idle keys; 0 means a minute, <0 always.
	SweepInterval time.Duration
	// Now is the store's clock (tests: storetest.ManualClock's Now); nil means the monotonic
	// one, and in a testing/synctest bubble the store was made in, the bubble's.
	Now func() time.Time
}

// NewMemoryStore returns an empty store; a nil cfg means the defaults. Idle keys are
// dropped a few at a time by the decisions themselves, so there is nothing to close.
func NewMemoryStore(cfg *MemoryConfig) *MemoryStore {
	if cfg == nil {
		cfg = &MemoryConfig{}
	}
	m := &MemoryStore{
		keySeed:    maphash.MakeSeed(),
		scopeSeed:  maphash.MakeSeed(),
		maxKeys:    int64(cmp.Or(max(cfg.MaxKeys, 0), 1<<20)),
		sweepEvery: int64(max(0, cmp.Or(cfg.SweepInterval, time.Minute))),
		tables:     map[string]*keyTable{},
	}
	switch start := time.Now(); {
	case cfg.Now != nil:
		now, epoch := cfg.Now, cfg.Now()
		m.now = func() int64 { return int64(now().Sub(epoch)) }
	case start == start.Round(0): // no monotonic reading: in a testing/synctest bubble
		m.now = bubbleClock(start)
	default:
		m.now = func() int64 { return int64(time.Since(start)) }
	}
	return m
}

// bubbleClock is the clock of a store made in a synctest bubble at epoch. Read outside it
// (the bubble ended; the store is the process's default), it goes on from its last bubble
// reading: the bubble's made-up date would leap ahead and free every grant.
func bubbleClock(epoch time.Time) func() int64 {
	var last atomic.Int64 // the latest reading in the bubble
	var once sync.Once
	var outside time.Time // the first reading outside it
	return func() int64 {
		now := time.Now()
		if now == now.Round(0) { // in the bubble
			n := int64(now.Sub(epoch))
			last.Store(n)
			return n
		}
		once.Do(func() { outside = now })
		return last.Load() + int64(time.Since(outside))
	}
}

// hash names a key within its policy's table: two seeded hashes and the policy's salt, so
// that no choice of scope and key texts, or limit, makes two collide more often than chance.
func (m *MemoryStore) hash(q *Query) uint64 {
	return maphash.String(m.keySeed, q.Key) ^ maphash.String(m.scopeSeed, q.Scope) ^ q.Policy.salt
}

// saltSeed seeds the salt that sets a registered limit's keys apart in a MemoryStore
// (Policy.salt), apart from every store's own seeds.
var saltSeed = maphash.MakeSeed()

// Len returns the number of keys held, idle ones not yet dropped included.
func (m *MemoryStore) Len() int { return int(m.keys.Load()) }

// table returns the key table of p's text, remembered on p so that the common case, one
// store per policy, takes no lock.
func (m *MemoryStore) table(p *Policy) *keyTable {
	if t := p.memo.Load(); t != nil && t.store == m {
		return t
	}
	m.mu.Lock()
	t := m.tables[p.text]
	if t == nil {
		t = &keyTable{store: m, policy: p, overflow: make([]int64, p.stateLen)}
		p.resetState(t.overflow)
		for i := range t.shards {
			t.shards[i].entries = map[uint64][]int64{}
		}
		m.tables[p.text] = t
		m.list = append(m.list, t)
	}
	m.mu.Unlock()
	p.memo.Store(t)
	return t
}

// lock returns q's key table, its hash and its shard, locked.
func (m *MemoryStore) lock(q *Query) (*keyTable, uint64, *shard) {
	t := m.table(q.Policy)
	h := m.hash(q)
	sh := &t.shards[h>>(64-shardBits)]
	sh.mu.Lock()
	return t, h, sh
}

// Decide implements Store; it fails only for a nil policy or too high a cost.
func (m *MemoryStore) Decide(_ context.Context, q Query) (d Decision, err error) {
	err = m.decide(&d, &q, m.now())
	return d, err
}

// decide is Decide at now on the store's clock, writing into *d, which is zero.
func (m *MemoryStore) decide(d *Decision, q *Query, now int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	if q.Cost > p.minCount {
		return p.checkCost(q.Cost) // before any key is made for it
	}
	t, h, sh := m.lock(q)
	e := t.entry(sh, h)
	if e == nil { // the store is full: a step of the store-wide sweep may make room
		sh.mu.Unlock()
		m.sweepRound(now)
		sh.mu.Lock()
		e = t.entry(sh, h) // another decision may have added it meanwhile
	}
	if e == nil {
		// No earlier than a sweep of the key's shard either: it may have dropped this key.
		now = max(now, sh.lastSweep)
		sh.mu.Unlock()
		t.overflowMu.Lock()
		err := p.apply(d, t.overflow, now, q.Cost, q.Mode)
		t.overflowMu.Unlock()
		return err
	}
	// Record no earlier than a sweep, among times a dropped key still counted, nor than a
	// reset, among times it forgot: Release must tell the two apart.
	now = max(now, sh.lastSweep, e[0]+1)
	err := p.apply(d, e[1:], now, q.Cost, q.Mode)
	if now-sh.lastPass >= m.sweepEvery {
		sh.sweepStep(t, now)
	}
	sh.mu.Unlock()
	return err
}

// entry returns the entry of key h in sh, whose lock the caller holds, adding it if there
// is room; nil if the store is full. A newcomer starts from the overflow bucket's history,
// where it may have been granted while the store was full.
func (t *keyTable) entry(sh *shard, h uint64) []int64 {
	if e := sh.entries[h]; e != nil {
		return e
	}
	// Count first: newcomers in other shards add keys at the same time.
	if m := t.store; m.keys.Add(1) > m.maxKeys {
		m.keys.Add(-1)
		return nil
	}
	e := make([]int64, 1+t.policy.stateLen)
	e[0] = never
	t.overflowMu.Lock()
	copy(e[1:], t.overflow)
	t.overflowMu.Unlock()
	sh.entries[h] = e
	sh.order = append(sh.order, h)
	return e
}

// Reset implements Resetter; it fails only for a nil policy. The key's entry stays, empty,
// holding the key's clock at the reset: Release ignores grants made no later (in flight
// across the reset), and later grants are recorded after it.
func (m *MemoryStore) Reset(_ context.Context, q Query) error {
	if q.Policy == nil {
		return errNilPolicy
	}
	t, h, sh := m.lock(&q)
	defer sh.mu.Unlock()
	if e := sh.entries[h]; e != nil {
		// The key's clock, not the store's, which may have stepped back; and never lower
		// than an earlier reset's, whose forgotten grants stay forgotten.
		e[0] = max(e[0], t.policy.keyClock(e[1:], m.now()))
		t.policy.resetState(e[1:])
		return nil
	}
	// Never used, or swept: nothing to forget. Unless newcomers share the overflow bucket,
	// where the key's grants may be among others': clearing it would free them all,
	// keeping it leaves the key refused, so the caller must learn it.
	t.overflowMu.Lock()
	defer t.overflowMu.Unlock()
	if !t.policy.idle(t.overflow, m.now()) {
		return fmt.Errorf("the memory store is at its key cap (MemoryConfig.MaxKeys %d): the key may be counted in the bucket newcomers share, which a reset of one key cannot clear; raise MaxKeys", m.maxKeys)
	}
	return nil
}

// Release implements Releaser; it fails only for a nil policy.
func (m *MemoryStore) Release(_ context.Context, q Query, grant int64) error {
	if q.Policy == nil {
		return errNilPolicy
	}
	t, h, sh := m.lock(&q)
	defer sh.mu.Unlock()
	switch e := sh.entries[h]; {
	case e == nil:
		// Decided in the overflow bucket while the store was full (or swept since, and then
		// the grant is out of every window and not in the overflow bucket either).
		t.overflowMu.Lock()
		defer t.overflowMu.Unlock()
		t.policy.release(t.overflow, grant, q.Cost)
	case grant > e[0]:
		// Not forgotten by a reset: a grant no later than it may share its time (or bucket)
		// with a later one.
		t.policy.release(e[1:], grant, q.Cost)
	}
	return nil
}
