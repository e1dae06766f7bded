package redisstore

// QueueIdle reports whether no call waits and no flight is out: what every test that has
// finished its decisions must see, or a flight was lost and later calls would stall.
func (s *Store) QueueIdle() bool {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	return len(s.queue.waiting) == 0 && s.queue.flying == 0
}
