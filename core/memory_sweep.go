package core

// Idle keys are dropped in steps of sweepChunk entries, each taken by a decision: the
// periodic sweep takes one in a decision's own shard once SweepInterval has passed since
// that shard's last pass, and a newcomer at the key cap takes one of the store-wide round.
// No decision pays for a scan of a whole shard.

// sweepChunk is how many entries a sweep step examines: small enough that a step costs
// about what a few decisions do.
const sweepChunk = 16

// sweepStep examines the next sweepChunk entries from the shard's cursor and drops the idle
// ones; the caller holds sh.mu. It reports whether the cursor came round, which ends a pass
// over the shard.
func (sh *shard) sweepStep(t *keyTable, now int64) (passed bool) {
	n := 0
	for ; n < sweepChunk && sh.cursor < len(sh.order); n++ {
		if !sh.dropIfIdle(t, sh.cursor, now) {
			sh.cursor++
		}
	}
	if hook := t.store.sweepHook; hook != nil {
		hook(n)
	}
	if sh.cursor < len(sh.order) {
		return false
	}
	sh.endPass(now)
	return true
}

// sweep drops every idle key of the shard at once; the caller holds sh.mu.
func (sh *shard) sweep(t *keyTable, now int64) {
	for i := 0; i < len(sh.order); {
		if !sh.dropIfIdle(t, i, now) {
			i++
		}
	}
	sh.endPass(now)
}

// dropIfIdle drops the key at index i of sh.order if it is idle at now, moving the last
// key into its place, and reports whether it did.
func (sh *shard) dropIfIdle(t *keyTable, i int, now int64) bool {
	h := sh.order[i]
	if !t.idle(sh.entries[h], now) {
		return false
	}
	delete(sh.entries, h)
	last := len(sh.order) - 1
	sh.order[i] = sh.order[last]
	sh.order = sh.order[:last]
	t.store.keys.Add(-1)
	sh.lastSweep = max(sh.lastSweep, now)
	return true
}

// endPass follows a pass over every entry: the cursor starts again, the periodic sweep
// waits its interval from now, and a shard that has lost most of its keys moves them to
// smaller storage, since a Go map never shrinks. That copy is the one part of a step that
// grows with the shard; it runs only once three in four keys are gone, so its cost is
// spread over the drops that made it due.
func (sh *shard) endPass(now int64) {
	sh.cursor = 0
	sh.lastPass = max(sh.lastPass, now)
	if n := len(sh.order); cap(sh.order) > 4*n+64 {
		sh.order = append(make([]uint64, 0, 2*n), sh.order...)
		entries := make(map[uint64][]int64, 2*n)
		for h, e := range sh.entries {
			entries[h] = e
		}
		sh.entries = entries
	}
}

// idle reports whether dropping entry e at now cannot change a later decision or release:
// its state holds no grant a window counts, and a reset it records is so old that every
// grant the reset forgot is out of every window.
func (t *keyTable) idle(e []int64, now int64) bool {
	if !t.policy.idle(e[1:], now) {
		return false
	}
	if e[0] == never {
		return true
	}
	longest := int64(t.policy.longest)
	d := now - e[0]
	return d > longest && d-longest > longest // d > 2*longest, which may not fit an int64
}

// sweepRound moves a full store's round of all shards on by one step: a step of the shard
// it is on, which it leaves once that shard's cursor comes round. A newcomer that finds
// the round busy leaves it to the one that holds it: newcomers flooding a full store must
// not queue behind one another's steps.
func (m *MemoryStore) sweepRound(now int64) {
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
	sh.mu.Lock()
	if sh.sweepStep(t, now) {
		m.roundAt++
	}
	sh.mu.Unlock()
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
