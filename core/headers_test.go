package core_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// The RateLimit field follows draft-ietf-httpapi-ratelimit-headers-11: t is the time within
// which no more than r fit, for a sliding log until the oldest grant leaves the window, and
// on a refusal Retry-After agrees with it. Grants at 0, 20 and 40 s of 3/1m, then a request
// at 41 s: t=19 and Retry-After 19 (t was 59, until the quota was whole).
func TestRateLimitFieldTIsUntilTheQuotaGrows(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_000_000, 0))
	l := adapter.Must(3, time.Minute, core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})))
	in := adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}
	var last time.Duration
	for _, s := range []struct {
		at               time.Duration
		rateLimit, retry string
	}{
		{0, `"3/1m";r=2;t=60`, ""},
		{20 * time.Second, `"3/1m";r=1;t=40`, ""},
		{40 * time.Second, `"3/1m";r=0;t=20`, ""},
		{41 * time.Second, `"3/1m";r=0;t=19`, "19"},
		{60 * time.Second, `"3/1m";r=0;t=20`, ""}, // the first grant has left; a new one is at 60 s
	} {
		clock.Advance(s.at - last)
		last = s.at
		h := http.Header{}
		l.Check(context.Background(), in, adapter.HeaderMap(h))
		if got := h.Get("RateLimit"); got != s.rateLimit {
			t.Errorf("at %v: RateLimit %q, want %q", s.at, got, s.rateLimit)
		}
		if got := h.Get("Retry-After"); got != s.retry {
			t.Errorf("at %v: Retry-After %q, want %q", s.at, got, s.retry)
		}
	}
}

// fieldRecorder is a HeaderAdder that keeps every name it is given.
type fieldRecorder struct {
	h     http.Header
	names map[string]bool
}

func (r *fieldRecorder) Set(name, value string) { r.names[name] = true; r.h[name] = []string{value} }
func (r *fieldRecorder) Add(name, value string) {
	r.names[name] = true
	r.h[name] = append(r.h[name], value)
}
func (r *fieldRecorder) Values(name string) []string { return r.h[name] }

// Adapters may store the names core sets as they are (fasthttp's, without normalizing):
// core sets only the Header constants, whatever the style, outcome or failure.
func TestFieldNamesAreTheHeaderConstants(t *testing.T) {
	known := map[string]bool{hook.HeaderRateLimitPolicy: true, hook.HeaderRateLimit: true, hook.HeaderRetryAfter: true,
		hook.HeaderLimit: true, hook.HeaderRemaining: true, hook.HeaderReset: true}
	rec := &fieldRecorder{names: map[string]bool{}}
	mem := func() core.Option { return core.WithStore(core.NewMemoryStore(nil)) }
	quiet := core.WithErrorHook(func(context.Context, error) {})
	var limits []adapter.Limiter
	for _, style := range []core.HeaderStyle{core.HeadersStandard, core.HeadersLegacy, core.HeadersBoth} {
		styled := core.WithHeaders(style)
		if style != core.HeadersLegacy { // which has no RateLimit-Policy to carry a pk
			limits = append(limits, adapter.Must(1, time.Hour, styled, mem(), core.WithPartitionKey("0123456789abcdef")))
		}
		limits = append(limits,
			adapter.Must(1, time.Hour, styled, mem()),
			adapter.Must(1, time.Hour, styled, mem(), core.WithDryRun()),
			adapter.Must(1, time.Hour, styled, mem(), core.WithCost(func(core.Request) int { return 2 }), quiet),
			adapter.Must(1, time.Hour, styled, core.WithStore(downStore{}), core.WithFailMode(core.FailOpen), quiet),
			adapter.Must(1, time.Hour, styled, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed), quiet),
			adapter.Must(1, time.Hour, styled, core.WithStore(downStore{}), core.WithFailMode(core.FailLocal), quiet))
	}
	in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1", Request: fakeRequest{}}
	for range 2 { // admitted, then refused
		for i, l := range limits {
			rec.h = http.Header{}
			l.Check(context.Background(), in, rec)
			// Stacked: a second limit of the same policy adds its members to the first's.
			limits[(i+1)%len(limits)].Check(context.Background(), in, rec)
		}
	}
	for name := range rec.names {
		if !known[name] {
			t.Errorf("core set the field %q, not one of the Header constants", name)
		}
	}
	for name := range known {
		if !rec.names[name] {
			t.Errorf("no case set %q: the test no longer covers every field", name)
		}
	}
}
