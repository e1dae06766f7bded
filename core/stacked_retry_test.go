package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// A refusal's Retry-After is how long the client ought to wait. Where limits stack, the
// limits that ran before the refusing one recorded the request too; when one of them has
// nothing left for longer than the refusing limit's wait (its own RateLimit member on the
// same response says r=0;t=60), Retry-After is that longer wait: with the refusing
// limit's own, a client that waited it was refused again.
func TestStackedRefusalsRetryAfterIsLongEnough(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_000_000, 0))
	store := core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now}))
	appWide := adapter.Must(3, time.Minute, store, core.WithScope("api"))
	route := adapter.Must(1, 10*time.Second, store)
	in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req()}
	send := func() (bool, adapter.HeaderMap) {
		h := adapter.HeaderMap{}
		for _, l := range []adapter.Limiter{appWide, route} {
			if !adapter.Check(l, context.Background(), in, h).Allowed {
				return false, h
			}
		}
		return true, h
	}
	var h adapter.HeaderMap
	var ok bool
	for range 3 {
		ok, h = send()
	}
	if ok {
		t.Fatal("the third request within 10s was admitted by 1/10s")
	}
	secs, err := strconv.Atoi(h.Values(adapter.HeaderRetryAfter)[0])
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Duration(secs) * time.Second)
	if ok, h2 := send(); !ok {
		t.Fatalf("refused with Retry-After: %d (RateLimit %q), then refused again after waiting %ds (RateLimit %q, Retry-After %q)",
			secs, h.Values(adapter.HeaderRateLimit), secs, h2.Values(adapter.HeaderRateLimit), h2.Values(adapter.HeaderRetryAfter))
	}
}

// TestSpentForReadsMembers: the longest wait of the members with nothing left is read from
// RateLimit lines as this package writes them, whatever a tier's name holds.
func TestSpentForReadsMembers(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  int64
	}{
		{nil, 0},
		{[]string{`"3/1m";r=2;t=60`}, 0},
		{[]string{`"3/1m";r=0;t=60`}, 60},
		{[]string{`"3/1m";r=0;t=60, "1/1h";r=0;t=3599`}, 3599},
		{[]string{`"3/1m";r=0;t=60`, `"1/1h";r=1;t=3599`}, 60},
		{[]string{`"3/1m#a,b;r=0;t=999";r=1;t=5`}, 0},               // a name holding what looks like parameters
		{[]string{`"x\";r=0;t=99, \"";r=0;t=7`}, 7},                 // an escaped quote inside the name
		{[]string{`"3/1m";r=0;t=42;pk=:AAAA:, "2/1s";r=0;t=1`}, 42}, // a partition key
		{[]string{`"3/1m";t=30;r=0`}, 30},                           // parameters in any order
		{[]string{`"3/1m";r=0`}, 0},                                 // no t
		{[]string{`"3/1m";r=0;t=99999999999999999999999`}, 999999999999999999},
	} {
		if got := core.SpentFor(c.lines); got != c.want {
			t.Errorf("spentFor(%q) = %d, want %d", c.lines, got, c.want)
		}
	}
}
