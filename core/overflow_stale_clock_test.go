package core_test

import (
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// A sweep drops a key once none of its grants is in a window at the sweep's time, so a
// decision whose clock reading predates the sweep (a request that read the clock before a
// racing one, a clock stepped back) must be recorded no earlier than it: there the
// dropped grants would still count. A key that then lands in the overflow bucket, the
// store being full, was recorded at its stale reading.
func TestOverflowDecisionRecordsNoEarlierThanTheSweepThatDroppedTheKey(t *testing.T) {
	s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: 1, SweepInterval: 5 * time.Second})
	p := mustPolicy(core.Rate{Count: 1, Period: 10 * time.Second})
	sec := int64(time.Second)
	q := core.Query{Policy: p, Key: "K"}
	if d, _ := s.DecideAt(q, 1*sec); !d.Allowed {
		t.Fatalf("first grant refused: %+v", d)
	}
	s.DecideAt(core.Query{Policy: p, Key: "K", Mode: core.Peek}, 12*sec) // the sweep at 12s drops K
	if core.HoldsKey(s, p, "", "K") {
		t.Fatal("K was not swept: the test tests nothing")
	}
	s.DecideAt(core.Query{Policy: p, Key: "Z"}, 12*sec) // Z takes the only place
	d, err := s.DecideAt(q, 5*sec)                      // K, from the overflow bucket
	if err != nil {
		t.Fatal(err)
	}
	if core.HoldsKey(s, p, "", "K") {
		t.Fatal("K got an entry of its own: the test tests nothing")
	}
	if d.Allowed && d.Grant < 11*sec {
		t.Fatalf("K granted at 1s, swept at 12s, then granted again in the overflow bucket at %v: two grants %v apart under %v",
			time.Duration(d.Grant), time.Duration(d.Grant-1*sec), p)
	}
}
