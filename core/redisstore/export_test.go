package redisstore

import (
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// QueueIdle reports whether no call waits and no send is out, on every server's queue:
// what a test that has finished its decisions must see, once its last flights have
// landed, or a flight was lost and later calls would stall.
func (s *Store) QueueIdle() bool {
	idle := func(q *queue) bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting) == 0 && q.flying == 0
	}
	ok := idle(&s.queue)
	s.nodes.Range(func(_, q any) bool {
		ok = ok && idle(q.(*queue))
		return true
	})
	return ok
}

// SetRefusedPause sets how long after a refused connection s's decisions fail without
// being sent.
func SetRefusedPause(s *Store, d time.Duration) { s.pause = d }

// EngineState returns core's engine state of a key that holds no grant under p.
func EngineState(p *core.Policy) []int64 { return hook.NewState(p) }

// EngineDecide is core's engine deciding on state s at now: what every script must match,
// decision for decision.
func EngineDecide(p *core.Policy, s []int64, now int64, cost int, mode core.Mode) (core.Decision, error) {
	d, err := hook.DecideState(p, s, now, cost, uint8(mode))
	if err != nil {
		return core.Decision{}, err
	}
	return d.(core.Decision), nil
}

// EngineRelease is core's engine giving back the grant recorded at grant on state s.
func EngineRelease(p *core.Policy, s []int64, grant int64, cost int) {
	hook.ReleaseState(p, s, grant, cost)
}
