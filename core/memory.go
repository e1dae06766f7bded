package core

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// The MemoryConfig defaults.
const (
	defaultMaxKeys       = 1 << 20
	defaultSweepInterval = time.Minute
)

// shardCount is how many shards hold a policy's keys: decisions on different keys rarely
// wait on one another's lock.
const shardCount = 64

// MemoryStore is the in-process Store, and the default: exact, allocation-free per
// decision, bounded, with no goroutine to stop. At MaxKeys, newcomers share one bucket per
// policy until idle keys make room: no live key is evicted, so no client exceeds its limit.
type MemoryStore struct {
	keySeed, scopeSeed maphash.Seed
	start              time.Time    // when the store was made; now counts from it
	clock              func() int64 // replaces time.Since(start) when set (MemoryConfig.Now, a synctest bubble)
	maxKeys            int64
	sweepEvery         int64        // how long a shard waits between sweeps, in nanoseconds
	keys               atomic.Int64 // keys held; the overflow buckets are not counted

	mu     sync.Mutex
	tables map[string]*keyTable // by policy text: equal policies share buckets

	// The round a full store's newcomers sweep, one step each, over every shard of every
	// table in turn (see sweepRound).
	roundMu sync.Mutex
	round   []*keyTable
	roundAt int // the table index times shardCount plus the shard index

	sweepHook func(entries int) // for tests: told how many entries each sweep step examines
}

// A keyTable holds the keys of one policy.
type keyTable struct {
	store  *MemoryStore
	policy *Policy
	shards [shardCount]shard

	// overflow is the state every newcomer shares while the store is full: made on first
	// need, never swept, outside the shards and the key count.
	overflowMu sync.Mutex
	overflow   []int64
}

// A shard holds some of a policy's keys, each by the 64-bit seeded hash of its scope and
// key. Two keys of one policy share an entry with probability about n²/2⁶⁵ for n keys,
// and sharing only ever makes a limit stricter.
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
	m := &MemoryStore{
		keySeed:    maphash.MakeSeed(),
		scopeSeed:  maphash.MakeSeed(),
		start:      time.Now(),
		maxKeys:    defaultMaxKeys,
		sweepEvery: int64(defaultSweepInterval),
		tables:     map[string]*keyTable{},
	}
	if inBubble(m.start) {
		m.clock = bubbleClock(m.start)
	}
	if cfg != nil {
		if cfg.MaxKeys > 0 {
			m.maxKeys = int64(cfg.MaxKeys)
		}
		if cfg.SweepInterval != 0 {
			m.sweepEvery = max(0, int64(cfg.SweepInterval))
		}
		if now := cfg.Now; now != nil {
			epoch := now()
			m.clock = func() int64 { return int64(now().Sub(epoch)) }
		}
	}
	return m
}

// hash names a key within its policy's table: two seeded hashes, so that no choice of
// scope and key texts makes two pairs collide more often than chance.
func (m *MemoryStore) hash(scope, key string) uint64 {
	return maphash.String(m.keySeed, key) ^ maphash.String(m.scopeSeed, scope)
}

// Len returns the number of keys held, idle ones not yet dropped included.
func (m *MemoryStore) Len() int { return int(m.keys.Load()) }

// table returns the key table of p's text, remembered on p for the common case of one
// store per policy, so that finding it takes no lock.
func (m *MemoryStore) table(p *Policy) *keyTable {
	if t := p.memo.Load(); t != nil && t.store == m {
		return t
	}
	m.mu.Lock()
	t := m.tables[p.text]
	if t == nil {
		t = &keyTable{store: m, policy: p}
		for i := range t.shards {
			t.shards[i].entries = map[uint64][]int64{}
		}
		m.tables[p.text] = t
	}
	m.mu.Unlock()
	p.memo.Store(t)
	return t
}

func (t *keyTable) shard(h uint64) *shard { return &t.shards[h>>(64-6)] }

// Decide implements Store; it fails only for a nil policy or too high a cost.
func (m *MemoryStore) Decide(_ context.Context, q Query) (d Decision, err error) {
	err = m.decide(&d, &q, m.now())
	return d, err
}

// decide is Decide at now, on the store's clock, writing into *d, which is zero (see
// Policy.apply).
func (m *MemoryStore) decide(d *Decision, q *Query, now int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	if q.Cost > p.minCount {
		return p.checkCost(q.Cost) // before any key is made for it
	}
	t := m.table(p)
	h := m.hash(q.Scope, q.Key)
	sh := t.shard(h)
	sh.mu.Lock()
	e := sh.entries[h]
	if e == nil {
		if e = t.add(sh, h); e == nil {
			sh.mu.Unlock()
			return t.decideNewcomer(d, q, sh, h, now)
		}
	}
	err := t.apply(d, q, sh, e, now)
	if now-sh.lastPass >= m.sweepEvery {
		sh.sweepStep(t, now)
	}
	sh.mu.Unlock()
	return err
}

// apply decides q on the key's entry e in sh, whose lock the caller holds.
func (t *keyTable) apply(d *Decision, q *Query, sh *shard, e []int64, now int64) error {
	// A decision whose clock reading predates a sweep happens after it: it must not
	// record a grant among times a dropped key still counted. Nor among those a reset
	// forgot, so that Release can tell the two apart.
	now = max(now, sh.lastSweep)
	if e[0] != never {
		now = max(now, e[0]+1)
	}
	return t.policy.apply(d, e[1:], now, q.Cost, q.Mode)
}

// add returns a new entry for key h in sh, whose lock the caller holds, or nil if the
// store is full. A newcomer starts from the overflow bucket's history: it may have been
// granted there while the store was full, and forgetting that would let it exceed its
// limit.
func (t *keyTable) add(sh *shard, h uint64) []int64 {
	if !t.store.reserve() {
		return nil
	}
	e := make([]int64, 1+t.policy.stateLen)
	e[0] = never
	t.overflowMu.Lock()
	if t.overflow != nil {
		copy(e[1:], t.overflow)
	} else {
		t.policy.resetState(e[1:])
	}
	t.overflowMu.Unlock()
	sh.entries[h] = e
	sh.order = append(sh.order, h)
	return e
}

// decideNewcomer decides a key the full store does not hold: it first sweeps a step of
// the store-wide round, which may make room for it, and otherwise decides it in the
// overflow bucket.
func (t *keyTable) decideNewcomer(d *Decision, q *Query, sh *shard, h uint64, now int64) error {
	t.store.sweepRound(now)
	sh.mu.Lock()
	e := sh.entries[h] // another decision may have added it meanwhile
	if e == nil {
		e = t.add(sh, h)
	}
	if e != nil {
		defer sh.mu.Unlock()
		return t.apply(d, q, sh, e, now)
	}
	sh.mu.Unlock()
	t.overflowMu.Lock()
	defer t.overflowMu.Unlock()
	if t.overflow == nil {
		t.overflow = t.policy.newState()
	}
	return t.policy.apply(d, t.overflow, now, q.Cost, q.Mode)
}

// reserve counts a new key if the store holds fewer than MaxKeys. Newcomers in other
// shards add keys at the same time, under other locks: a check and a later add would let
// each of them past the cap.
func (m *MemoryStore) reserve() bool {
	for {
		n := m.keys.Load()
		if n >= m.maxKeys {
			return false
		}
		if m.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
