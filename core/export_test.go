package core

import (
	"context"
	"time"
)

// Views of the memory store's insides for the external tests.

// SweepChunk is how many entries one sweep step examines.
const SweepChunk = sweepChunk

// CountSweptEntries makes m add to *n the entries each of its sweep steps examines. Set it
// before m is used, and use m from one goroutine: *n is not synchronized.
func CountSweptEntries(m *MemoryStore, n *int) { m.sweepHook = func(k int) { *n += k } }

// HoldsKey reports whether m holds an entry of its own for the key, rather than deciding it
// in the overflow bucket.
func HoldsKey(m *MemoryStore, p *Policy, scope, key string) bool {
	_, h, sh := m.lock(&Query{Policy: p, Scope: scope, Key: key})
	defer sh.mu.Unlock()
	return sh.entries[h] != nil
}

// ShardOf returns the index of the shard that holds, or would hold, the key.
func ShardOf(m *MemoryStore, p *Policy, scope, key string) int {
	return int(m.hash(&Query{Policy: p, Scope: scope, Key: key}) >> (64 - shardBits))
}

// EntryCount returns how many entries m's tables hold, all shards together, and the most
// any one shard holds.
func EntryCount(m *MemoryStore) (total, most int) {
	for _, t := range tables(m) {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			n := len(sh.order)
			sh.mu.Unlock()
			total += n
			most = max(most, n)
		}
	}
	return total, most
}

// tables returns m's key tables.
func tables(m *MemoryStore) []*keyTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.list
}

// ClientKey returns the key the client of a request counts against under limit l, which
// internal/adapter built.
func ClientKey(l any, peer string, r Request) string {
	in := input{Peer: peer, Request: r}
	if r != nil {
		in.Route = r.Route()
	}
	return l.(*limiter).clientKey(context.Background(), &in)
}

// MaxPeriodForTest is the longest period a rate may have.
const MaxPeriodForTest = maxPeriod

// SweepNow drops every idle key of m now: a whole pass over every shard.
func SweepNow(m *MemoryStore) {
	now := m.now()
	for _, t := range tables(m) {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			for sh.cursor = 0; !sh.sweepStep(t, now); {
			}
			sh.mu.Unlock()
		}
	}
}

// ErrQuotaNotRegistered is what a Quota's methods return before its limit is registered.
var ErrQuotaNotRegistered = errNoLimit

// The engine's internals, for the engine's own tests.

func (p *Policy) NewState() []int64 {
	s := make([]int64, p.stateLen)
	p.resetState(s)
	return s
}

func (p *Policy) StateLen() int { return p.stateLen }

func (p *Policy) Longest() time.Duration { return p.longest }

func (p *Policy) Idle(s []int64, now int64) bool { return p.idle(s, now) }

func (p *Policy) Apply(s []int64, now int64, cost int, mode Mode) (d Decision, err error) {
	err = p.apply(&d, s, now, cost, mode)
	return d, err
}

func (m *MemoryStore) DecideAt(q Query, now int64) (d Decision, err error) {
	err = m.decide(&d, &q, now)
	return d, err
}

func (r Rate) Exact() bool { return r.exact() }

func (p *Policy) Release(s []int64, at int64, cost int) { p.release(s, at, cost) }

func (m *MemoryStore) ReleaseAt(q Query, grant int64) error {
	return m.Release(context.Background(), q, grant)
}

// QuotaLimits is how many limits q reaches.
func QuotaLimits(q *Quota) int {
	ls, _ := q.limits()
	return len(ls)
}

// QuotaHeld is how many limits q holds, collected ones not yet dropped included.
func QuotaHeld(q *Quota) int { return len(q.ls) }

// ResetKeys is how many of the keys m holds for p record a reset.
func ResetKeys(m *MemoryStore, p *Policy) int {
	t, n := m.table(p), 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, e := range sh.entries {
			if e[0] != never {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func (m *MemoryStore) Hash(scope, key string) uint64 {
	return m.hash(&Query{Policy: new(Policy), Scope: scope, Key: key})
}
