package core

// sweepChunk is how many entries a sweep step examines. Decisions take the steps, one at
// most each, so none pays for a whole shard: in its own shard once SweepInterval has passed
// since that shard's last pass, and, for a newcomer at the key cap, in the store-wide round
// (sweepRound).
const sweepChunk = 16

// sweepStep examines the next sweepChunk entries from the shard's cursor and drops the idle
// ones; the caller holds sh.mu. It reports whether the cursor came round, which ends a pass
// over the shard.
func (sh *shard) sweepStep(t *keyTable, now int64) (passed bool) {
	n := 0
	for ; n < sweepChunk && sh.cursor < len(sh.order); n++ {
		h := sh.order[sh.cursor]
		if !t.idle(sh.entries[h], now) {
			sh.cursor++
			continue
		}
		delete(sh.entries, h)
		last := len(sh.order) - 1
		sh.order[sh.cursor] = sh.order[last]
		sh.order = sh.order[:last]
		t.store.keys.Add(-1)
		sh.lastSweep = max(sh.lastSweep, now)
	}
	if hook := t.store.sweepHook; hook != nil {
		hook(n)
	}
	if sh.cursor < len(sh.order) {
		return false
	}
	sh.cursor = 0
	sh.lastPass = max(sh.lastPass, now)
	// A Go map never shrinks: a shard that has lost three in four of its keys moves them to
	// smaller storage, a copy whose cost is spread over the drops that made it due.
	if left := len(sh.order); cap(sh.order) > 4*left+64 {
		sh.order = append(make([]uint64, 0, 2*left), sh.order...)
		entries := make(map[uint64][]int64, 2*left)
		for h, e := range sh.entries {
			entries[h] = e
		}
		sh.entries = entries
	}
	return true
}

// idle reports whether dropping entry e at now cannot change a later decision or release:
// its state holds no grant a window counts, and a reset it records is so old that every
// grant the reset forgot is out of every window.
func (t *keyTable) idle(e []int64, now int64) bool {
	longest, d := int64(t.policy.longest), now-e[0]
	// d > 2*longest, which may overflow; d means nothing when e[0] is never.
	return t.policy.idle(e[1:], now) && (e[0] == never || d > longest && d-longest > longest)
}

// sweepRound takes a step of the shard a full store's round over every shard is on, moving
// on once its cursor comes round. A newcomer that finds the round busy leaves it: those
// flooding a full store must not queue behind one another's steps.
func (m *MemoryStore) sweepRound(now int64) {
	if !m.roundMu.TryLock() {
		return
	}
	defer m.roundMu.Unlock()
	m.mu.Lock()
	tables := m.list // only ever appended to; the caller's table is in it
	m.mu.Unlock()
	m.roundAt %= len(tables) * shardCount // tables made since join in at the end of a round
	t := tables[m.roundAt/shardCount]
	sh := &t.shards[m.roundAt%shardCount]
	sh.mu.Lock()
	if sh.sweepStep(t, now) {
		m.roundAt++
	}
	sh.mu.Unlock()
}
