package redisstore_test

import (
	"testing"
	"time"
)

// A stallMeter measures how far the machine falls behind while a call runs: a goroutine
// sleeps in short steps and sums how much longer each took than asked. On a loaded machine
// a caller can wake long after its deadline through no fault of the store; a deadline
// test widens its bound by what the meter saw, and by nothing when the machine keeps up.
type stallMeter struct {
	stop  chan struct{}
	total chan time.Duration
}

func startStallMeter() *stallMeter {
	const step = 10 * time.Millisecond
	m := &stallMeter{stop: make(chan struct{}), total: make(chan time.Duration, 1)}
	go func() {
		t := time.NewTimer(step)
		defer t.Stop()
		var sum time.Duration
		for {
			start := time.Now()
			t.Reset(step)
			select {
			case <-t.C:
				sum += time.Since(start) - step
			case <-m.stop:
				// The step under way counts as far as it ran past its length.
				sum += max(0, time.Since(start)-step)
				m.total <- sum
				return
			}
		}
	}()
	return m
}

// Stop ends the measurement and returns the delay seen.
func (m *stallMeter) Stop() time.Duration {
	close(m.stop)
	return <-m.total
}

// deadlineAttempts bounds how often a deadline test measures a call again when the machine
// was slower than even the meter saw; a store that ignores its deadline misses it every time.
const deadlineAttempts = 3

// withinDeadline runs call, which must end within deadline plus grace plus the machine's
// own delay during it, and returns its error. A late call is run again, up to
// deadlineAttempts times in all, so call must be safe to repeat: only latency is retried,
// and call checks everything else itself.
func withinDeadline(t *testing.T, what string, deadline, grace time.Duration, call func() error) error {
	t.Helper()
	var took []string
	var err error
	for range deadlineAttempts {
		m := startStallMeter()
		start := time.Now()
		err = call()
		el := time.Since(start)
		stall := m.Stop()
		if el <= deadline+grace+stall {
			return err
		}
		took = append(took, el.String()+" (machine delay "+stall.String()+")")
	}
	t.Errorf("%s: took %v, deadline %v plus %v and the machine's delay", what, took, deadline, grace)
	return err
}
