package core_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// A memory store made inside a testing/synctest bubble keeps the bubble's time, as
// time.Since does there: a test waits out a window with time.Sleep, without real waiting.
func TestMemoryStoreKeepsSynctestTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := core.NewMemoryStore(nil)
		q := core.Query{Policy: mustPolicy(core.Rate{Count: 1, Period: time.Hour}), Scope: "GET /", Key: "192.0.2.1"}
		decide := func() bool {
			d, err := s.Decide(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return d.Allowed
		}
		if !decide() || decide() {
			t.Fatal("1/1h: want the first request admitted and the second refused")
		}
		time.Sleep(time.Hour - time.Nanosecond)
		if decide() {
			t.Fatal("1/1h: admitted again a nanosecond before the hour was up")
		}
		time.Sleep(time.Nanosecond)
		if !decide() {
			t.Fatal("1/1h: refused once the bubble's hour was up: the store is not on the bubble's clock")
		}
	})
}
