package monotime_test

import (
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/internal/monotime"
)

// Nanotime is the clock time.Since reads: an interval timed with time.Since inside two
// Nanotime readings is never longer than theirs.
func TestNanotimeIsTheMonotonicClock(t *testing.T) {
	a := monotime.Nanotime()
	start := time.Now()
	time.Sleep(2 * time.Millisecond)
	d := time.Since(start)
	b := monotime.Nanotime()
	if d < 2*time.Millisecond {
		t.Fatalf("time.Since measured %v across a 2ms sleep", d)
	}
	if b-a < int64(d) {
		t.Fatalf("Nanotime moved %dns around an interval time.Since measured at %v: not the same clock", b-a, d)
	}
}
