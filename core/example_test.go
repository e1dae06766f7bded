package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// A policy's text form is what configuration files and environment variables hold.
func ExampleParsePolicy() {
	p, err := core.ParsePolicy("500/2s, 2000/10s")
	fmt.Println(p, err)

	_, err = core.ParsePolicy("3/1m,5/soon")
	fmt.Println(err)
	// Output:
	// 500/2s,2000/10s <nil>
	// policy "3/1m,5/soon": at offset 5, "5/soon": bad period "soon": want a duration such as 1m, 2s, 500ms or 1d: reqlimit: bad policy
}

// A store decides for a key at an instant; with a manual clock the answers are exact and
// repeatable. The fourth request is refused, and RetryAfter says when the first grant
// leaves the window: 40s, not the whole minute.
func ExampleMemoryStore() {
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := core.NewMemoryStore(core.WithClock(clock))
	q := core.Query{Policy: core.MustParsePolicy("3/1m"), Scope: "GET /user/test", Key: "192.0.2.1"}
	for i := 0; i < 4; i++ {
		d, _ := store.Decide(context.Background(), q)
		fmt.Printf("allowed=%v remaining=%d retry=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
		clock.Advance(10 * time.Second)
	}
	// Output:
	// allowed=true remaining=2 retry=0s
	// allowed=true remaining=1 retry=0s
	// allowed=true remaining=0 retry=0s
	// allowed=false remaining=0 retry=30s
}

// Several rates are decided together: a request needs room in every one.
func ExampleNewPolicy() {
	p := core.MustPolicy(core.Per(2, time.Second), core.Per(3, time.Minute))
	state := p.NewState()
	var now int64
	for i := 0; i < 4; i++ {
		d, _ := p.Apply(state, now, 1, core.Enforce)
		fmt.Printf("t=%ds allowed=%v tightest=%s\n", now/int64(time.Second), d.Allowed, p.Rate(d.Rate))
		now += int64(time.Second)
	}
	// Output:
	// t=0s allowed=true tightest=2/1s
	// t=1s allowed=true tightest=3/1m
	// t=2s allowed=true tightest=3/1m
	// t=3s allowed=false tightest=3/1m
}

// A Counter counts events over a sliding window, outside HTTP.
func ExampleCounter() {
	clock := core.NewManualClock(time.Unix(0, 0))
	failed, _ := core.NewCounter("failed-logins", 5, 15*time.Minute, core.NewMemoryStore(core.WithClock(clock)))
	ctx := context.Background()
	failed.Add(ctx, "alice", 1)
	clock.Advance(10 * time.Minute)
	n, _ := failed.Add(ctx, "alice", 1)
	fmt.Println(n)
	clock.Advance(6 * time.Minute)
	n, _ = failed.Count(ctx, "alice")
	fmt.Println(n)
	// Output:
	// 2
	// 1
}
