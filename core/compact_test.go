package core_test

import (
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// TestCompactUnits: the unit puts at most 2^15 in a period, is 1, 2 or 5 times a power of
// ten, and divides whole milliseconds and seconds for periods long enough to have them.
func TestCompactUnits(t *testing.T) {
	for _, c := range []struct {
		T    time.Duration
		unit time.Duration
	}{
		{time.Millisecond, 50 * time.Nanosecond},
		{100 * time.Millisecond, 5 * time.Microsecond},
		{time.Second, 50 * time.Microsecond},
		{time.Minute, 2 * time.Millisecond},
		{time.Hour, 200 * time.Millisecond},
		{24 * time.Hour, 5 * time.Second},
		{10 * time.Microsecond, time.Nanosecond},
	} {
		p := mustPolicy(core.Rate{Count: 3, Period: c.T})
		if got := p.Unit(); got != c.unit {
			t.Errorf("%v: unit %v, want %v", c.T, got, c.unit)
		}
		if n := (c.T + p.Unit() - 1) / p.Unit(); n > 1<<15 {
			t.Errorf("%v: %d units in a period", c.T, n)
		}
	}
}
