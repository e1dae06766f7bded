package core

import (
	"context"
	"fmt"
)

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
