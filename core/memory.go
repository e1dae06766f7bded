package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/reqlimit/reqlimit/internal/monotime"
)

// The MemoryConfig defaults.
const (
	defaultMaxKeys       = 1 << 20
	defaultSweepInterval = time.Minute
)

const shardCount = 64

// MemoryStore is the in-process Store, and the default: exact, allocation-free per
// decision, bounded, with no goroutine to stop. At MaxKeys, newcomers share one bucket per
// policy until idle keys make room: no live key is evicted, so no client exceeds its limit.
type MemoryStore struct {
	seedKey    maphash.Seed
	keySeeds   [2]uint64
	seedScope  maphash.Seed
	clock      func() int64 // nanoseconds since the store was made; nil: monotime.Nanotime since base
	base       int64        // monotime.Nanotime when the store was created
	maxKeys    int64
	sweepEvery int64
	keys       atomic.Int64 // keys held; the overflow buckets are not counted

	mu     sync.Mutex
	tables map[string]*keyTable // by policy text: equal policies share buckets

	// The store-wide round of a full store's sweeping: the tables it walks, fetched anew
	// each time it has walked them all, and the shard it is on (table index times
	// shardCount plus shard index). Only ever TryLocked: newcomers must not queue on it.
	roundMu sync.Mutex
	round   []*keyTable
	roundAt int

	sweepHook func(slots int) // for tests: told how many slots each sweep examines
}

// A keyTable holds the keys of one policy.
type keyTable struct {
	store  *MemoryStore
	policy *Policy
	width  int // int64 slots per entry: hash, lock word, then the policy's state
	shards [shardCount]tableShard

	// overflow is the one entry every newcomer shares while the store is full; made on
	// first need, never swept, outside the shards and the key count.
	overflowMu sync.Mutex
	overflow   atomic.Pointer[int64]

	// scope is the first scope decided in the table and its hash, kept for good: a limit
	// on one route always brings the same scope, so its hash is computed once. Set once,
	// so a table shared by many routes allocates nothing either.
	scope atomic.Pointer[scopeHash]

	// fences holds, per key reset within its longest period, the latest time a grant the
	// reset forgot can carry.
	// A grant is found by its time, or its bucket's or unit's, so without the fence a
	// request in flight across a reset would give back a grant made after it; and the
	// key's grants after the reset are recorded after the fence, so that theirs are given
	// back. Read lock-free by decisions; written under fenceMu.
	fenceMu    sync.Mutex
	fences     sync.Map    // uint64 key hash: int64 fence
	fenceN     int         // keys in fences
	fencePrune int         // fenceN at which fence next drops the old ones
	fenced     atomic.Bool // fences may hold a key: decisions and Release look
}

type scopeHash struct {
	scope string
	hash  uint64
}

type tableShard struct {
	mu        sync.Mutex // adds, sweeps and growth; finding a key takes no lock
	slots     atomic.Pointer[slotArray]
	used      int          // slots not nil: live entries and tombstones
	live      int          // live entries
	cursor    int          // the next slot a sweep step examines
	lastSweep atomic.Int64 // the latest time a key was dropped: decisions start no earlier
	lastPass  atomic.Int64 // when the cursor last came round: the periodic sweep waits
	_         [32]byte     // keeps neighbouring shards' locks off one cache line
}

// A slotArray is an open-addressing table, linear probing, of entries. Each slot keeps the
// entry's hash beside the pointer, so a probe compares hashes within the table's own cache
// lines and touches only the entry it is after: with many keys, every entry touched is a
// cache miss. An entry is a []int64 of keyTable.width, held by a pointer to its first slot:
//
//	[0] the key's 64-bit hash, never 0; 0 once the key is swept (read atomically)
//	[1] a sync.Mutex (8 bytes, zero when unlocked) guarding the state
//	[2:] the policy's state
//
// One allocation per key, and the hash, lock and state share a cache line for small rings.
type slotArray struct {
	mask  uint64
	slots []slot
}

// A slot holds an entry and its hash. The hash is stored before the entry is published, and
// read after it, so a reader that sees an entry sees that entry's hash or a later slot
// owner's; either way find trusts only the entry's own hash word.
type slot struct {
	hash  atomic.Uint64
	entry atomic.Pointer[int64]
}

// The entry's slot 1 holds a sync.Mutex: this fails to compile if one ever stops fitting.
var _ = [1]struct{}{}[unsafe.Sizeof(sync.Mutex{})-8]

func entryLock(s []int64) *sync.Mutex { return (*sync.Mutex)(unsafe.Pointer(&s[1])) }

// sweptHash marks a swept entry; live hashes are never 0 (see hash).
const sweptHash = 0

// tombstone marks a slot whose entry was swept, so that probes for other keys go on past it.
var tombstone = new(int64)

// A MemoryConfig configures a MemoryStore; its zero value means every default.
type MemoryConfig struct {
	MaxKeys int // the keys held at most (see MemoryStore); 0 means 1<<20
	// SweepInterval is how often shards start dropping idle keys; 0 means a minute, <0 always.
	SweepInterval time.Duration
	// Now is the store's clock (tests: storetest.ManualClock's Now); nil means the monotonic
	// one, and in a testing/synctest bubble the store was made in, the bubble's.
	Now func() time.Time
}

// NewMemoryStore returns an empty store; a nil cfg means the defaults.
func NewMemoryStore(cfg *MemoryConfig) *MemoryStore {
	m := &MemoryStore{
		seedKey:    maphash.MakeSeed(),
		keySeeds:   [2]uint64{rand.Uint64(), rand.Uint64()},
		seedScope:  maphash.MakeSeed(),
		base:       monotime.Nanotime(),
		sweepEvery: int64(defaultSweepInterval),
		tables:     map[string]*keyTable{},
	}
	if epoch := time.Now(); inBubble(epoch) {
		m.clock = bubbleClock(epoch, m.base)
	}
	if cfg != nil {
		m.maxKeys = int64(cfg.MaxKeys)
		if cfg.SweepInterval != 0 {
			m.sweepEvery = max(0, int64(cfg.SweepInterval))
		}
		if now := cfg.Now; now != nil {
			epoch := now()
			m.clock = func() int64 { return int64(now().Sub(epoch)) }
		}
	}
	if m.maxKeys < 1 {
		m.maxKeys = defaultMaxKeys
	}
	return m
}

// inBubble reports whether now, a time.Now reading, was taken inside a testing/synctest
// bubble: there it has no monotonic reading, since the bubble's time is its own and moves
// only as the bubble sleeps.
func inBubble(now time.Time) bool { return now == now.Round(0) }

// bubbleClock is the clock of a store made in a synctest bubble at epoch, when the
// monotonic clock read base: the bubble's time inside a bubble. Outside one (the bubble
// ended, and a test goes on with the store, or the store is the process's default) the
// bubble's time means nothing, and time.Since would read the wall clock against the
// bubble's made-up date, decades ahead: it reads the monotonic clock since base instead.
// A bubble that slept has run ahead of that, so the clock steps back, which keeps grants
// longer: stricter, never laxer.
func bubbleClock(epoch time.Time, base int64) func() int64 {
	return func() int64 {
		if now := time.Now(); inBubble(now) {
			return int64(now.Sub(epoch))
		}
		return monotime.Nanotime() - base
	}
}

// now returns nanoseconds since the store was created. Without an injected clock it reads
// only the monotonic clock, which is cheaper than time.Now and never jumps.
func (m *MemoryStore) now() int64 {
	if m.clock != nil {
		return m.clock()
	}
	return monotime.Nanotime() - m.base
}

// hash names a key within its policy's table t. Keys are 64-bit seeded hashes: two distinct
// keys of one policy share a bucket with probability about n²/2⁶⁵ for n keys (3·10⁻⁸ at a
// million), and sharing only ever makes a limit stricter.
func (m *MemoryStore) hash(t *keyTable, scope, key string) uint64 {
	var hs uint64
	if sh := t.scope.Load(); sh != nil && sameText(sh.scope, scope) {
		hs = sh.hash
	} else {
		hs = maphash.String(m.seedScope, scope)
		if sh == nil {
			// A copy: a caller's scope could alias a buffer it reuses.
			t.scope.CompareAndSwap(nil, &scopeHash{scope: strings.Clone(scope), hash: hs})
		}
	}
	h := m.hashKey(key) ^ bits.RotateLeft64(hs, 29)
	if h == sweptHash {
		h = 1
	}
	return h
}

// Decide implements Store; it fails only for a nil policy or too high a cost.
func (m *MemoryStore) Decide(_ context.Context, q Query) (d Decision, err error) {
	// Small enough to inline, so that a caller holding a *MemoryStore gets d in place:
	// returned in registers, it is stored and copied back in a way that stalls the copy.
	err = m.decideNow(&d, &q)
	return d, err
}

// decideNow is decide at the store's clock.
func (m *MemoryStore) decideNow(d *Decision, q *Query) error { return m.decide(d, q, m.now()) }

// decide is Decide at now, in nanoseconds since the store was created (or since the
// injected clock's first reading), writing into *d, which is zero (see Policy.apply).
func (m *MemoryStore) decide(d *Decision, q *Query, now int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	if q.Cost > p.minCount {
		return p.checkCost(q.Cost) // before any key is made for it
	}
	t := m.table(p)
	h := m.hash(t, q.Scope, q.Key)
	sh := &t.shards[h>>(64-6)]
	for {
		e := sh.find(h)
		if e == nil {
			e = sh.add(t, h, now)
		}
		s := unsafe.Slice(e, t.width)
		mu := entryLock(s)
		mu.Lock()
		if atomic.LoadInt64(&s[0]) == sweptHash {
			mu.Unlock()
			continue // swept meanwhile: find or add it again
		}
		// A decision whose clock reading predates a sweep happens after it: it must not
		// record a grant among times a dropped key still counted.
		now = max(now, sh.lastSweep.Load())
		if t.fenced.Load() {
			now = t.pastFence(h, now)
		}
		err := p.apply(d, s[2:], now, q.Cost, q.Mode)
		mu.Unlock()
		if now-sh.lastPass.Load() >= m.sweepEvery && sh.mu.TryLock() {
			sh.sweepStep(t, now)
			sh.mu.Unlock()
		}
		return err
	}
}

// Reset implements Resetter; it fails only for a nil policy.
func (m *MemoryStore) Reset(_ context.Context, q Query) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	t := m.table(p)
	h := m.hash(t, q.Scope, q.Key)
	e := t.shards[h>>(64-6)].find(h)
	if e == nil {
		// Never used, or swept: nothing to forget. Unless newcomers share the overflow
		// bucket, where the key's grants may be among others': clearing it would free them
		// all, keeping it leaves the key refused, so the caller must learn it.
		if t.overflowHolds(m.now()) {
			return fmt.Errorf("the memory store is at its key cap (MemoryConfig.MaxKeys %d): the key may be counted in the bucket newcomers share, which a reset of one key cannot clear; raise MaxKeys", m.maxKeys)
		}
		return nil
	}
	s := unsafe.Slice(e, t.width)
	mu := entryLock(s)
	mu.Lock()
	if atomic.LoadInt64(&s[0]) != sweptHash {
		// Read under the key's lock: every grant the reset forgets was decided before,
		// on an earlier reading, and recorded no later than the key's clock then.
		t.fence(h, m.now(), s[2:])
		t.reset(s[2:])
	}
	mu.Unlock()
	return nil
}

// fence records that the reset at now of key h, whose state is s, forgot every grant up
// to the key's clock: now, or later if the key recorded later times (the store's clock
// stepped back), as a grant it forgot may carry. Fences older than the longest period are
// dropped: a grant that old is out of every window.
func (t *keyTable) fence(h uint64, now int64, s []int64) {
	at := t.policy.keyClock(s, now)
	t.fenceMu.Lock()
	defer t.fenceMu.Unlock()
	// Dropped when the map has doubled since: each reset pays for a bounded share of them.
	if t.fenceN >= max(64, t.fencePrune) {
		t.fences.Range(func(k, f any) bool {
			if t.fenceGone(f.(int64), now) {
				t.fences.Delete(k)
				t.fenceN--
			}
			return true
		})
		t.fencePrune = 2 * t.fenceN
	}
	// Never back: a second reset at a clock that stepped back would let through a grant
	// the first forgot.
	f, ok := t.fences.Load(h)
	if !ok {
		t.fenceN++
	}
	if !ok || at > f.(int64) {
		t.fences.Store(h, at)
	}
	t.fenced.Store(true)
}

// pastFence returns now, or the earliest time after the fence of key h when now is not
// after it: the key's grants since its reset are recorded after the fence, however fine
// the clock, so that Release can tell them from those
// the reset forgot. Read under the key's lock, as Reset sets the fence.
func (t *keyTable) pastFence(h uint64, now int64) int64 {
	v, ok := t.fences.Load(h)
	if !ok {
		return now
	}
	return max(now, v.(int64)+1)
}

// fenceGone reports whether a fence at f is older than every window at now.
func (t *keyTable) fenceGone(f, now int64) bool {
	longest := int64(t.policy.longest)
	d := now - f
	return d > longest && d-longest > longest // d > 2*longest, which may not fit an int64
}

// fencedOut reports whether grant was made before a reset of key h, which forgot it.
func (t *keyTable) fencedOut(h uint64, grant int64) bool {
	if !t.fenced.Load() {
		return false
	}
	f, ok := t.fences.Load(h)
	return ok && grant <= f.(int64)
}

// Release implements Releaser; it fails only for a nil policy.
func (m *MemoryStore) Release(_ context.Context, q Query, grant int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	t := m.table(p)
	h := m.hash(t, q.Scope, q.Key)
	e := t.shards[h>>(64-6)].find(h)
	if e == nil {
		// Decided in the overflow bucket while the store was full (or swept since, and
		// then the grant is out of every window and not in the overflow bucket either).
		if e = t.overflow.Load(); e == nil {
			return nil
		}
	}
	s := unsafe.Slice(e, t.width)
	mu := entryLock(s)
	mu.Lock()
	// Under the key's lock, as Reset sets its fence: a grant the key was reset since is
	// gone, and its time (or bucket, or unit) may be a later grant's.
	if atomic.LoadInt64(&s[0]) != sweptHash && !t.fencedOut(h, grant) {
		p.release(s[2:], grant, q.Cost)
	}
	mu.Unlock()
	return nil
}

// table returns the key table of p's text, remembered on p for the common case of one
// store per policy: the table itself, whose store says whether it is this store's, so
// that finding it waits on one load.
func (m *MemoryStore) table(p *Policy) *keyTable {
	if t := p.memo.Load(); t != nil && t.store == m {
		return t
	}
	m.mu.Lock()
	t := m.tables[p.text]
	if t == nil {
		t = &keyTable{store: m, policy: p, width: 2 + p.stateLen}
		for i := range t.shards {
			t.shards[i].slots.Store(newSlotArray(8))
		}
		m.tables[p.text] = t
	}
	m.mu.Unlock()
	p.memo.Store(t)
	return t
}

func newSlotArray(n int) *slotArray {
	return &slotArray{mask: uint64(n - 1), slots: make([]slot, n)}
}

// find returns the entry of hash h, or nil; it takes no lock.
func (sh *tableShard) find(h uint64) *int64 {
	a := sh.slots.Load()
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		sl := &a.slots[i]
		e := sl.entry.Load()
		if e == nil {
			return nil
		}
		// The entry's own hash word is checked too: a swept entry has cleared it.
		if sl.hash.Load() == h && e != tombstone && uint64(atomic.LoadInt64(e)) == h {
			return e
		}
	}
}

// add returns the entry of hash h, adding it if no other decision did first, or the
// policy's overflow entry when the store is full.
func (sh *tableShard) add(t *keyTable, h uint64, now int64) *int64 {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.find(h); e != nil {
		return e
	}
	m := t.store
	if !m.reserve() {
		// A step here and a step of the round, not whole shards: a flood of newcomers
		// must not make each of them scan the store while holding a shard's lock.
		sh.sweepStep(t, now)
		if !m.reserve() {
			m.sweepRound(sh, now)
			if !m.reserve() {
				return t.overflowEntry()
			}
		}
	}
	s := make([]int64, t.width)
	s[0] = int64(h) // published by insert's atomic store
	t.reset(s[2:])
	t.inheritOverflow(s)
	sh.insert(&s[0], h)
	return &s[0]
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

// reset clears a key's state s to hold no grant.
func (t *keyTable) reset(s []int64) {
	t.policy.resetState(s)
}

// idle reports whether the key of state s holds no grant any window still counts at now.
func (t *keyTable) idle(s []int64, now int64) bool {
	return t.policy.idle(s, now)
}

// overflowEntry returns the policy's overflow entry, making it on first need. Its hash
// slot holds 1, never the swept mark: it is never swept.
func (t *keyTable) overflowEntry() *int64 {
	if e := t.overflow.Load(); e != nil {
		return e
	}
	t.overflowMu.Lock()
	defer t.overflowMu.Unlock()
	if e := t.overflow.Load(); e != nil {
		return e
	}
	s := make([]int64, t.width)
	s[0] = 1
	t.reset(s[2:])
	t.overflow.Store(&s[0])
	return &s[0]
}

// overflowHolds reports whether the policy's overflow bucket holds grants a window counts
// at now.
func (t *keyTable) overflowHolds(now int64) bool {
	e := t.overflow.Load()
	if e == nil {
		return false
	}
	o := unsafe.Slice(e, t.width)
	mu := entryLock(o)
	mu.Lock()
	defer mu.Unlock()
	return !t.idle(o[2:], now)
}

// inheritOverflow starts a new key from the overflow bucket's history while that bucket
// still counts grants: the newcomer may have been granted there while the store was full,
// and forgetting that would let it exceed its limit. Lock order: shard, then entry.
func (t *keyTable) inheritOverflow(s []int64) {
	e := t.overflow.Load()
	if e == nil {
		return
	}
	o := unsafe.Slice(e, t.width)
	mu := entryLock(o)
	mu.Lock()
	copy(s[2:], o[2:])
	mu.Unlock()
}

// insert puts a new entry in the table, growing it first if it is 13/16 full: a hit still
// probes about three slots, within a cache line or two, and a fuller table keeps the index
// a small share of a small key's memory (a grown table is about two fifths full again).
func (sh *tableShard) insert(e *int64, h uint64) {
	a := sh.slots.Load()
	if (sh.used+1)*16 > len(a.slots)*13 {
		a = sh.rebuild(max(8, 2*(sh.live+1)))
	}
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		old := a.slots[i].entry.Load()
		if old == nil || old == tombstone {
			if old == nil {
				sh.used++
			}
			sh.live++
			a.slots[i].hash.Store(h)
			a.slots[i].entry.Store(e)
			return
		}
	}
}

// rebuild copies the live entries into a new table of at least n slots, dropping the
// tombstones. Readers still on the old table find the same entries there.
func (sh *tableShard) rebuild(n int) *slotArray {
	n = 1 << bits.Len(uint(n-1))
	old := sh.slots.Load()
	a := newSlotArray(n)
	for i := range old.slots {
		e := old.slots[i].entry.Load()
		if e == nil || e == tombstone {
			continue
		}
		h := old.slots[i].hash.Load()
		for j := h & a.mask; ; j = (j + 1) & a.mask {
			if a.slots[j].entry.Load() == nil {
				a.slots[j].hash.Store(h)
				a.slots[j].entry.Store(e)
				break
			}
		}
	}
	sh.used = sh.live
	sh.slots.Store(a)
	return a
}

// sweepChunk is how many slots a sweep step examines: small enough that a step costs about
// what a few decisions do, so that newcomers at the cap and the periodic sweep add a
// bounded price to the decision that runs them.
const sweepChunk = 16

// sweepStep examines the next sweepChunk slots from the shard's cursor and drops the idle
// keys among them; the caller holds sh.mu. It reports whether the cursor came round, which
// ends a pass over the shard.
func (sh *tableShard) sweepStep(t *keyTable, now int64) (passed bool) {
	a := sh.slots.Load()
	from := sh.cursor & int(a.mask) // the table may have been rebuilt smaller since
	to := min(from+sweepChunk, len(a.slots))
	sh.sweepSlots(t, a, from, to, now)
	sh.cursor = to
	if to < len(a.slots) {
		return false
	}
	sh.cursor = 0
	sh.endPass(now)
	return true
}

// sweep drops every idle key of the shard at once; the caller holds sh.mu.
func (sh *tableShard) sweep(t *keyTable, now int64) {
	a := sh.slots.Load()
	sh.sweepSlots(t, a, 0, len(a.slots), now)
	sh.endPass(now)
}

// endPass follows a pass over every slot: the table is rebuilt if it is mostly tombstones,
// and the periodic sweep waits its interval from now. A rebuild is the one part of a step
// that grows with the shard, but it runs only once the tombstones outnumber the live
// entries, so its cost is spread over the drops that made them.
func (sh *tableShard) endPass(now int64) {
	if sh.used > 2*sh.live+8 {
		sh.rebuild(max(8, 2*sh.live))
	}
	sh.lastPass.Store(max(now, sh.lastPass.Load()))
}

// sweepSlots drops the idle keys in slots [from, to) of a, the shard's table; the caller
// holds sh.mu. A key being decided right now is not idle and is skipped.
func (sh *tableShard) sweepSlots(t *keyTable, a *slotArray, from, to int, now int64) {
	if hook := t.store.sweepHook; hook != nil {
		hook(to - from)
	}
	dropped := false
	for i := from; i < to; i++ {
		e := a.slots[i].entry.Load()
		if e == nil || e == tombstone {
			continue
		}
		s := unsafe.Slice(e, t.width)
		mu := entryLock(s)
		if !mu.TryLock() {
			continue // being decided: not idle
		}
		if t.idle(s[2:], now) {
			atomic.StoreInt64(&s[0], sweptHash)
			a.slots[i].entry.Store(tombstone)
			sh.live--
			t.store.keys.Add(-1)
			dropped = true
		}
		mu.Unlock()
	}
	if dropped { // only a dropped key's grants need later decisions held back (see decide)
		sh.lastSweep.Store(max(now, sh.lastSweep.Load()))
	}
}

// sweepRound moves a full store's round of all shards on by one step: a step of the shard
// it is on, which it leaves once that shard's cursor comes round. own is the caller's
// shard, which it holds. Nothing here waits: a busy round is left to whoever holds it, and a
// busy shard is passed over (two full shards stepping each other must not deadlock).
func (m *MemoryStore) sweepRound(own *tableShard, now int64) {
	if !m.roundMu.TryLock() {
		return
	}
	defer m.roundMu.Unlock()
	if m.roundAt >= len(m.round)*shardCount {
		m.round, m.roundAt = m.tableList(), 0 // once a round: tables made since join in
		if len(m.round) == 0 {
			return
		}
	}
	t := m.round[m.roundAt/shardCount]
	sh := &t.shards[m.roundAt%shardCount]
	if sh != own {
		if !sh.mu.TryLock() {
			m.roundAt++
			return
		}
		defer sh.mu.Unlock()
	}
	if sh.sweepStep(t, now) {
		m.roundAt++
	}
}

func (m *MemoryStore) tableList() []*keyTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	tables := make([]*keyTable, 0, len(m.tables))
	for _, t := range m.tables {
		tables = append(tables, t)
	}
	return tables
}

// Len returns the number of keys held, idle ones not yet dropped included.
func (m *MemoryStore) Len() int { return int(m.keys.Load()) }

// sweep drops every idle key now.
func (m *MemoryStore) sweep() {
	now := m.now()
	for _, t := range m.tableList() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.sweep(t, now)
			sh.mu.Unlock()
		}
	}
}

// hashKey hashes a key of at most 16 bytes (an IPv4 address, most keys) as the Go runtime
// hashes such strings on machines without AES instructions (wyhash's short-input path)
// with the store's own seeds: in fewer steps than maphash, and without the seeds keys
// that collide are as hard to choose as for Go's maps on those machines. Longer keys go
// to maphash.
func (m *MemoryStore) hashKey(key string) uint64 {
	n := len(key)
	if n > 16 {
		return maphash.String(m.seedKey, key)
	}
	// a and b hold every byte of the key between them: keys of one length differ in a or b.
	var a, b uint64
	p := unsafe.Slice(unsafe.StringData(key), n)
	switch {
	case n >= 8:
		a, b = binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	case n >= 4:
		a, b = uint64(binary.LittleEndian.Uint32(p)), uint64(binary.LittleEndian.Uint32(p[n-4:]))
	case n > 0:
		a = uint64(p[0]) | uint64(p[n>>1])<<8 | uint64(p[n-1])<<16
	}
	return mix(0x1d8e4e27c47d124f^uint64(n), mix(a^m.keySeeds[1], b^m.keySeeds[0]))
}

// mix folds the 128-bit product of a and b into 64 bits.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// sameText is x == y, comparing texts of 8 to 16 bytes (most route patterns) as two
// words each rather than through a call.
func sameText(x, y string) bool {
	n := len(x)
	if n != len(y) {
		return false
	}
	if n < 8 || n > 16 {
		return x == y
	}
	p, q := unsafe.Slice(unsafe.StringData(x), n), unsafe.Slice(unsafe.StringData(y), n)
	return binary.LittleEndian.Uint64(p) == binary.LittleEndian.Uint64(q) &&
		binary.LittleEndian.Uint64(p[n-8:]) == binary.LittleEndian.Uint64(q[n-8:])
}
