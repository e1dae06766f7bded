package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// The middleware benchmarks measure the admitted path of any rate on a store whose clock
// runs ahead by a step per reading (aheadClock): a step slower than the rate admits every
// request, one faster refuses some, and the monotonic clock still moves under it.
func TestAheadClockMovesTheStoreOnByAStepPerReading(t *testing.T) {
	ctx := context.Background()
	p, err := core.ParsePolicy("3/1m")
	if err != nil {
		t.Fatal(err)
	}
	q := core.Query{Policy: p, Scope: "GET /user/{id}", Key: "192.0.2.1", Cost: 1}
	decide := func(step time.Duration, n int) (admitted int) {
		s := core.NewMemoryStore(&core.MemoryConfig{Now: aheadClock(step)})
		for range n {
			d, err := s.Decide(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	// 21 s a reading is slower than 3 a minute (one per 20 s): all admitted, where the
	// monotonic clock alone would refuse the fourth.
	if got := decide(21*time.Second, 1000); got != 1000 {
		t.Errorf("a step of 21s admitted %d of 1000 at 3/1m, want all", got)
	}
	// 15 s a reading is four a minute: every fourth is refused.
	if got := decide(15*time.Second, 1000); got < 740 || got > 760 {
		t.Errorf("a step of 15s admitted %d of 1000 at 3/1m, want about 750", got)
	}
	if got := decide(0, 10); got != 3 {
		t.Errorf("a step of 0 admitted %d of 10 at 3/1m, want 3: the monotonic clock", got)
	}
}
