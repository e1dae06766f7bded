package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// memberNames returns the names of the list members in a RateLimit or RateLimit-Policy
// field's lines (`"NAME";...`).
func memberNames(lines []string) []string {
	var names []string
	for _, line := range lines {
		for _, m := range strings.Split(line, ",") {
			m = strings.TrimSpace(m)
			if end := strings.Index(m[1:], `"`); strings.HasPrefix(m, `"`) && end >= 0 {
				names = append(names, m[1:1+end])
			}
		}
	}
	return names
}

// Where limits stack, each adds its members (docs/operations.md, "Response fields"), also
// a limit whose request is refused without a decision (its store failed under FailClosed,
// or its cost can never fit). It used to set RateLimit-Policy to its own policy alone,
// dropping the members the limits before it added while their RateLimit members stayed:
// RateLimit then named a policy RateLimit-Policy no longer listed, or, where the two
// limits share a rate, a refusal said its policy had r=2 left.
func TestUndecidedRefusalKeepsTheOtherLimitsMembers(t *testing.T) {
	onErr := core.WithErrorHook(func(context.Context, error) {})
	for _, c := range []struct {
		name  string
		outer string
		inner adapter.Limiter
	}{
		{"store down, FailClosed, other rate", "100/1h", adapter.Must(3, time.Minute,
			core.WithStore(downStore{}), core.WithFailMode(core.FailClosed), onErr)},
		{"store down, FailClosed, same rate", "3/1m", adapter.Must(3, time.Minute,
			core.WithStore(downStore{}), core.WithFailMode(core.FailClosed), onErr)},
		{"cost above the limit, same rate", "3/1m", adapter.Must(3, time.Minute,
			core.WithStore(core.NewMemoryStore(nil)), core.WithCost(func(core.Request) int { return 5 }), onErr)},
	} {
		t.Run(c.name, func(t *testing.T) {
			outer, err := adapter.Parse(c.outer, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("api"))
			if err != nil {
				t.Fatal(err)
			}
			h := adapter.HeaderMap{}
			in := adapter.Input{Route: "POST /upload", Peer: "192.0.2.1:1", Request: req()}
			if v := outer.Check(context.Background(), in, h); !v.Allowed {
				t.Fatal("the outer limit refused its first request")
			}
			if v := c.inner.Check(context.Background(), in, h); v.Allowed {
				t.Fatal("the inner limit admitted")
			}
			policy := memberNames(h.Values(hook.HeaderRateLimitPolicy))
			rl := memberNames(h.Values(hook.HeaderRateLimit))
			for _, n := range rl {
				found := false
				for _, p := range policy {
					found = found || p == n
				}
				if !found {
					t.Errorf("RateLimit member %q has no RateLimit-Policy member: RateLimit-Policy %q, RateLimit %q",
						n, h.Values(hook.HeaderRateLimitPolicy), h.Values(hook.HeaderRateLimit))
				}
			}
			if len(policy) != 2 {
				t.Errorf("RateLimit-Policy %q, RateLimit %q on a refusal: want the outer limit's member and the inner's in RateLimit-Policy", h.Values(hook.HeaderRateLimitPolicy), h.Values(hook.HeaderRateLimit))
			}
		})
	}
}

// The legacy fields hold one value each, "where limits stack, the one with the fewest
// left". A limit that refuses without a decision says none is left: leaving the fields of
// the limit before it, a 429 said X-RateLimit-Remaining: 2.
func TestUndecidedRefusalDoesNotLeaveLegacyRoom(t *testing.T) {
	legacy := core.WithHeaders(core.HeadersLegacy)
	outer := adapter.Must(3, time.Minute, legacy, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("api"))
	inner := adapter.Must(3, time.Minute, legacy, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed),
		core.WithErrorHook(func(context.Context, error) {}))
	h := adapter.HeaderMap{}
	in := adapter.Input{Route: "POST /upload", Peer: "192.0.2.1:1", Request: req()}
	outer.Check(context.Background(), in, h)
	if v := inner.Check(context.Background(), in, h); v.Allowed {
		t.Fatal("the inner limit admitted")
	}
	if r := h.Values(hook.HeaderRemaining); len(r) > 0 && r[0] != "0" {
		t.Fatalf("a refusal (store down, FailClosed) says X-RateLimit-Remaining %q, X-RateLimit-Limit %q: room the request did not get",
			r, h.Values(hook.HeaderLimit))
	}
}

// The undecided branch's "0 left" is for a refusal: a dry-run limit whose store is down
// under FailClosed admits the request (a dry run never refuses), and must leave the
// enforced limit's X-RateLimit-Remaining 2 as it is on the 200.
func TestDryRunUndecidedAdmissionKeepsTheOtherLimitsLegacyRoom(t *testing.T) {
	store := core.WithStore(core.NewMemoryStore(nil))
	appWide := adapter.Must(3, time.Minute, store, core.WithScope("api"), core.WithHeaders(core.HeadersLegacy))
	trial := adapter.Must(5, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed),
		core.WithDryRun(), core.WithHeaders(core.HeadersLegacy), core.WithErrorHook(func(context.Context, error) {}))
	in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req()}
	h := adapter.HeaderMap{}
	if !appWide.Check(context.Background(), in, h).Allowed {
		t.Fatal("app-wide limit refused")
	}
	if !trial.Check(context.Background(), in, h).Allowed {
		t.Fatal("a dry-run limit refused")
	}
	if got := h.Values(hook.HeaderRemaining); len(got) != 1 || got[0] != "2" {
		t.Errorf("admitted (the only enforced limit has 2 left; the dry-run one decided nothing): X-RateLimit-Remaining %q, X-RateLimit-Limit %q, want 2 of 3",
			got, h.Values(hook.HeaderLimit))
	}
}
