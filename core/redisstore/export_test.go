package redisstore

import (
	"time"
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

// QueueFor returns the queue of the server that holds key (see queueFor).
func QueueFor(s *Store, key string) *queue { return s.queueFor(key) }
