package core

import (
	"context"
	"fmt"
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

// inBubble reports whether now, a time.Now reading, was taken inside a testing/synctest
// bubble: there it has no monotonic reading, since the bubble's time is its own and moves
// only as the bubble sleeps.
func inBubble(now time.Time) bool { return now == now.Round(0) }

// bubbleClock is the clock of a store made in a synctest bubble at epoch: the bubble's
// time inside a bubble. Outside one (the bubble ended and a test goes on with the store,
// or the store is the process's default) the bubble's made-up date means nothing, so the
// clock goes on from its last reading in the bubble by the monotonic time since its first
// reading outside: it never leaps ahead, which would let every grant out of its window.
func bubbleClock(epoch time.Time) func() int64 {
	var last atomic.Int64                 // the latest reading in the bubble
	var outside atomic.Pointer[time.Time] // the first reading outside it
	return func() int64 {
		now := time.Now()
		if inBubble(now) {
			n := int64(now.Sub(epoch))
			last.Store(n)
			return n
		}
		outside.CompareAndSwap(nil, &now)
		return last.Load() + int64(time.Since(*outside.Load()))
	}
}

// now returns nanoseconds on the store's clock: since the store was made, unless
// MemoryConfig.Now or a bubble says otherwise.
func (m *MemoryStore) now() int64 {
	if m.clock != nil {
		return m.clock()
	}
	return int64(time.Since(m.start))
}

// runAhead makes the store's clock run ahead by step more at every reading, for
// hook.RunAhead. The store is then for one goroutine only.
func (m *MemoryStore) runAhead(step time.Duration) {
	var n int64
	m.clock = func() int64 { n++; return int64(time.Since(m.start)) + n*int64(step) }
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

// Reset implements Resetter; it fails only for a nil policy. The key's entry stays, empty,
// with the key's clock at the reset: a request in flight across the reset holds a grant
// made no later, which Release then ignores, and the key's later grants are recorded
// after it. The entry is swept like any other once that time is out of every window.
func (m *MemoryStore) Reset(_ context.Context, q Query) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	t := m.table(p)
	h := m.hash(q.Scope, q.Key)
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[h]
	if e == nil {
		// Never used, or swept: nothing to forget. Unless newcomers share the overflow
		// bucket, where the key's grants may be among others': clearing it would free them
		// all, keeping it leaves the key refused, so the caller must learn it.
		if t.overflowHolds(m.now()) {
			return fmt.Errorf("the memory store is at its key cap (MemoryConfig.MaxKeys %d): the key may be counted in the bucket newcomers share, which a reset of one key cannot clear; raise MaxKeys", m.maxKeys)
		}
		return nil
	}
	// The key's clock, not the store's: the store's may have stepped back (an injected
	// clock), and never lower than an earlier reset's, whose forgotten grants still count
	// as forgotten.
	e[0] = max(e[0], p.keyClock(e[1:], m.now()))
	p.resetState(e[1:])
	return nil
}

// overflowHolds reports whether the policy's overflow bucket holds grants a window counts
// at now.
func (t *keyTable) overflowHolds(now int64) bool {
	t.overflowMu.Lock()
	defer t.overflowMu.Unlock()
	return t.overflow != nil && !t.policy.idle(t.overflow, now)
}

// Release implements Releaser; it fails only for a nil policy.
func (m *MemoryStore) Release(_ context.Context, q Query, grant int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	t := m.table(p)
	h := m.hash(q.Scope, q.Key)
	sh := t.shard(h)
	sh.mu.Lock()
	if e := sh.entries[h]; e != nil {
		// A grant no later than the key's reset was forgotten by it: its time (or bucket)
		// may be a later grant's.
		if e[0] == never || grant > e[0] {
			p.release(e[1:], grant, q.Cost)
		}
		sh.mu.Unlock()
		return nil
	}
	sh.mu.Unlock()
	// Decided in the overflow bucket while the store was full (or swept since, and then
	// the grant is out of every window and not in the overflow bucket either).
	t.overflowMu.Lock()
	if t.overflow != nil {
		p.release(t.overflow, grant, q.Cost)
	}
	t.overflowMu.Unlock()
	return nil
}
