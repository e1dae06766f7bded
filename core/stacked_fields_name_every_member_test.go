package core_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

var memberName = regexp.MustCompile(`"([^"]+)";`)

// members returns the member names of a RateLimit field's lines, in order.
func members(lines []string) []string {
	var names []string
	for _, line := range lines {
		for _, m := range memberName.FindAllStringSubmatch(line, -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// Three limits of one policy stacked on a request, the second with a partition key and
// the third refusing undecided (FailClosed, its store down): each takes member names the
// others did not, and every RateLimit member has a RateLimit-Policy member of its name.
func TestStackedLimitsWithPartitionKeyAndUndecidedNameEveryMember(t *testing.T) {
	quiet := core.WithErrorHook(func(context.Context, error) {})
	for _, order := range [][]int{{0, 1, 2}, {1, 0, 2}, {0, 2, 1}, {2, 1, 0}} {
		all := []adapter.Limiter{
			adapter.Must(5, time.Minute),
			adapter.Must(5, time.Minute, core.WithPartitionKey("s3cret-s3cret-s3cret")),
			adapter.Must(5, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed), quiet),
		}
		h := hook.HeaderMap{}
		in := adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: fakeRequest{h: http.Header{}}}
		for _, i := range order {
			all[i].Check(context.Background(), in, h)
		}
		policy, limit := members(h[hook.HeaderRateLimitPolicy]), members(h[hook.HeaderRateLimit])
		if len(policy) != 3 || len(limit) != 2 {
			t.Fatalf("order %v: RateLimit-Policy %q, RateLimit %q; want 3 and 2 members", order,
				h[hook.HeaderRateLimitPolicy], h[hook.HeaderRateLimit])
		}
		if len(slices.Compact(slices.Sorted(slices.Values(policy)))) != 3 {
			t.Errorf("order %v: RateLimit-Policy names %q repeat", order, policy)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(limit)))) != 2 {
			t.Errorf("order %v: RateLimit names %q repeat: two limits' members under one name", order, limit)
		}
		for _, n := range limit {
			if !slices.Contains(policy, n) {
				t.Errorf("order %v: RateLimit member %q has no RateLimit-Policy member (%q)", order, n, h)
			}
		}
	}
}

// setOnly is a HeaderSetter that cannot add, as fasthttp's is not: it copies the value and
// keeps one line a field.
type setOnly struct{ h map[string]string }

func (s setOnly) Set(name, value string) { s.h[name] = string([]byte(value)) }

// With a setter that cannot add, the last limit's fields stand whole: a partitioned or an
// undecided limit after another sets its own policy with its own names, never a RateLimit
// member whose policy member another limit's field held.
func TestLastLimitsFieldsStandWholeWithASetterThatCannotAdd(t *testing.T) {
	quiet := core.WithErrorHook(func(context.Context, error) {})
	in := adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: fakeRequest{h: http.Header{}}}
	for _, last := range []struct {
		name  string
		l     adapter.Limiter
		limit bool // sets RateLimit
	}{
		{"partitioned", adapter.Must(5, time.Minute, core.WithPartitionKey("s3cret-s3cret-s3cret")), true},
		{"undecided", adapter.Must(5, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed), quiet), false},
		{"plain", adapter.Must(5, time.Minute), true},
	} {
		s := setOnly{h: map[string]string{}}
		adapter.Must(7, time.Second).Check(context.Background(), in, s)
		adapter.Must(5, time.Minute, core.WithPartitionKey("other-secret-other")).Check(context.Background(), in, s)
		last.l.Check(context.Background(), in, s)
		alone := setOnly{h: map[string]string{}}
		last.l.Check(context.Background(), in, alone)
		policy, limit := members([]string{s.h[hook.HeaderRateLimitPolicy]}), members([]string{s.h[hook.HeaderRateLimit]})
		if got, want := s.h[hook.HeaderRateLimitPolicy], alone.h[hook.HeaderRateLimitPolicy]; got != want || len(policy) != 1 {
			t.Fatalf("%s last: RateLimit-Policy %q, want the last limit's own %q", last.name, got, want)
		}
		// Its own members, not their counts: the limit counted this client twice.
		if got, want := limit, members([]string{alone.h[hook.HeaderRateLimit]}); last.limit && !slices.Equal(got, want) {
			t.Fatalf("%s last: RateLimit members %q, want the last limit's own %q", last.name, got, want)
		}
		for _, n := range limit {
			if !slices.Contains(policy, n) {
				t.Errorf("%s last: RateLimit member %q has no RateLimit-Policy member (%q)", last.name, n, s.h)
			}
		}
	}
}
