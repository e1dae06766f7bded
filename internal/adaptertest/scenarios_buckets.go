package adaptertest

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// Scenarios about which requests share a bucket: where the route is unknown, and where
// limits are stacked.
func init() { Scenarios = append(Scenarios, bucketScenarios...) }

func notFound(path string) Step {
	return Step{Request: Request{Path: path}, Status: 404}
}

var bucketScenarios = []Scenario{
	{
		// A refusal on a path with no route, by an app-wide limit whose deny function
		// writes nothing, gets the default refusal as on a route: not the framework's 404,
		// which would tell the client it was not refused.
		Name: "custom-deny-that-writes-nothing-on-an-unmatched-path-leaves-the-default-refusal",
		App: func(_ Traits, a Adapter, _ *Probe) App {
			return App{Use: []Limit{perMinute(1, a.WithDenyHandler(0, ""))}, Routes: []Route{{Path: "/a"}}}
		},
		Steps: fixed(notFound("/x"), Step{Request: Request{Path: "/x"}, Status: 429, Body: "Too Many Requests\n",
			Header: map[string]string{"X-Wait": "60", "Retry-After": "60"}}),
	},
	{
		// A request that matches no route has no pattern to key by. Keyed by its path, a
		// client would mint a bucket (and a store entry) per path it makes up; all of them
		// share one bucket per client instead.
		Name: "unmatched-paths-share-one-bucket",
		App: func(Traits, Adapter, *Probe) App {
			return App{Use: []Limit{perMinute(2)}, Routes: []Route{{Path: "/a"}}}
		},
		Steps: func(tr Traits) []Step {
			steps := []Step{notFound("/x0"), notFound("/x1"), refused("/x2"), refused("/x3/y"), refused("/x0")}
			if tr.UseSharesBucket {
				return append(steps, refused("/a"), from("192.0.2.8:1", notFound("/x4")))
			}
			return append(steps, ok("/a"), from("192.0.2.8:1", notFound("/x4")))
		},
	},
	{
		// Mounted before routing, a limit cannot know the route: every request behind it
		// shares one bucket per client, stricter than a bucket per route, never looser.
		Name: "mounted-before-routing-shares-one-bucket",
		Skip: func(tr Traits) string {
			if !tr.PreRouting {
				return tr.Name + "'s framework has no middleware before routing"
			}
			return ""
		},
		App: func(Traits, Adapter, *Probe) App {
			return App{Pre: []Limit{perMinute(2)}, Routes: []Route{{Path: "/a"}, {Path: "/b"}, {Path: "/user/:id"}}}
		},
		Steps: fixed(ok("/user/1"), ok("/user/2"), refused("/user/3"), refused("/a"), refused("/b"),
			refused("/nowhere"), from("192.0.2.8:1", ok("/b"))),
	},
	{
		// An app-wide limit and a route's own limit with the same policy are two limits:
		// each counts a request once, in a bucket of its own. Sharing one bucket, every
		// request would be recorded twice and the route would admit 1 of 3.
		Name: "stacked-limits-with-the-same-policy-count-apart",
		App: func(Traits, Adapter, *Probe) App {
			return App{Use: []Limit{perMinute(3)}, Routes: []Route{{Path: "/a", Limits: []Limit{perMinute(3)}}}}
		},
		Steps: fixed(ok("/a"), ok("/a"), ok("/a"), refused("/a")),
	},
	{
		// Every limit on a request adds its own members to the RateLimit fields (draft
		// -11), rather than the last one hiding the others; two limits with the same
		// policy name their members apart, by their place on the request: the second
		// "#2", the same in every instance whatever the order they registered in.
		Name: "stacked-limits-each-add-their-fields",
		App: func(Traits, Adapter, *Probe) App {
			return App{Use: []Limit{perMinute(10)}, Routes: []Route{
				{Path: "/a", Limits: []Limit{perMinute(3)}},
				{Path: "/b", Limits: []Limit{perMinute(10)}},
			}}
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Check: members(
				[]string{`"10/1m";q=10;w=60`, `"3/1m";q=3;w=60`}, []string{`"10/1m";r=9;t=60`, `"3/1m";r=2;t=60`})},
			ok("/a"), ok("/a"),
			Step{Request: Request{Path: "/a"}, Status: 429, Check: members(
				[]string{`"10/1m";q=10;w=60`, `"3/1m";q=3;w=60`}, []string{`"10/1m";r=6;t=60`, `"3/1m";r=0;t=60`})},
			Step{Request: Request{Path: "/b"}, Status: 200, Check: members(
				[]string{`"10/1m";q=10;w=60`, `"10/1m#2";q=10;w=60`}, []string{`"10/1m";r=*;t=60`, `"10/1m#2";r=*;t=60`})},
		),
	},
	{
		// Two limits that ask to share (the same scope and policy) still do.
		Name: "stacked-limits-sharing-a-scope-count-together",
		App: func(Traits, Adapter, *Probe) App {
			s := core.WithScope("login")
			return App{Routes: []Route{{Path: "/a", Limits: []Limit{perMinute(2, s)}}, {Path: "/b", Limits: []Limit{perMinute(2, s)}}}}
		},
		Steps: fixed(ok("/a"), ok("/b"), refused("/a"), refused("/b")),
	},
	{
		// A proxy that appends its own X-Real-IP line after the client's, instead of
		// replacing the field, passes the client's line on first: the last line is the
		// proxy's, and only it counts.
		Name: "single-address-header-takes-the-last-line",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithTrustedProxies("10.0.0.0/8"), core.WithForwardedHeader("X-Real-IP")))
		},
		Steps: fixed(
			from("10.0.0.1:1", ok("/a", "X-Real-IP", "203.0.113.1", "X-Real-IP", "198.51.100.7")),
			from("10.0.0.1:1", refused("/a", "X-Real-IP", "203.0.113.2", "X-Real-IP", "198.51.100.7")),
			from("10.0.0.1:1", ok("/a", "X-Real-IP", "203.0.113.1", "X-Real-IP", "198.51.100.8")),
		),
	},
	{
		// Forwarded through a trusted proxy, read from the adapter's header view (no
		// key function, so no full request is built): the rightmost address the trusted
		// proxies did not add is the client, over several lines as in one, and a forged
		// leftmost entry changes nothing.
		Name: "forwarded-header-keys-the-client-behind-a-trusted-proxy",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithTrustedProxies("10.0.0.0/8"), core.WithForwardedHeader("Forwarded")))
		},
		Steps: fixed(
			from("10.0.0.1:1", ok("/a", "Forwarded", "for=192.0.2.9")),
			from("10.0.0.2:1", refused("/a", "Forwarded", "for=203.0.113.5, for=192.0.2.9")),
			from("10.0.0.1:1", refused("/a", "Forwarded", "for=203.0.113.6", "Forwarded", "for=192.0.2.9;proto=https")),
			from("10.0.0.1:1", ok("/a", "Forwarded", "for=192.0.2.9, for=10.0.0.7", "Forwarded", "for=192.0.2.10")),
			from("10.0.0.1:1", ok("/a", "Forwarded", `for="[2001:db8::1]:443"`)),
			from("10.0.0.1:1", refused("/a", "Forwarded", `for=192.0.2.10, for="[2001:db8::2]"`)),
		),
	},
	{
		// A cost above the limit can never be admitted: 413 and no Retry-After, which
		// would invite a retry that cannot succeed, and no RateLimit state, which was not read.
		Name: "cost-above-the-limit-is-413-without-retry-after",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(2, core.WithCost(func(core.Request) int { return 5 }), p.ErrorHook()))
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 413, Header: map[string]string{
			"Retry-After": "", "RateLimit": "", "RateLimit-Policy": `"2/1m";q=2;w=60`}}),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			if len(p.Errors) != 1 || !errors.Is(p.Errors[0], core.ErrCostTooHigh) {
				t.Errorf("error hook saw %v, want one ErrCostTooHigh", p.Errors)
			}
		},
	},
	{
		// w is whole seconds; a window of 10ms is not advertised as w=1, a hundredfold
		// longer than it is.
		Name: "sub-second-window-advertises-no-w",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", Limit{Count: 5, Period: 10 * time.Millisecond})
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{
			"RateLimit-Policy": `"5/10ms";q=5`}}),
	},
	{
		// A count of a trillion per year, and the largest per century, work end to end:
		// no overflow on the way to the fields, which stay within a Structured Field
		// integer's 15 digits. (On 32-bit platforms: the largest count an int holds.)
		Name: "huge-counts-and-long-periods",
		App: func(Traits, Adapter, *Probe) App {
			return App{Routes: []Route{
				{Path: "/a", Limits: []Limit{{Policy: strconv.Itoa(trillion) + "/365d"}}},
				{Path: "/b", Limits: []Limit{{Count: bounds.LargestInt, Period: 100 * 365 * 24 * time.Hour}}},
			}}
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{
				"RateLimit-Policy": fmt.Sprintf(`"%d/365d";q=%d;w=31536000`, trillion, trillion)},
				Check: resetWithin(fmt.Sprintf(`"%d/365d";r=%d;t=`, trillion, trillion-1), 365*24*time.Hour)},
			Step{Request: Request{Path: "/b"}, Status: 200, Header: map[string]string{
				"RateLimit-Policy": fmt.Sprintf(`"%d/36500d";q=%d;w=3153600000`, bounds.LargestInt, bounds.LargestInt)},
				Check: resetWithin(fmt.Sprintf(`"%d/36500d";r=%d;t=`, bounds.LargestInt, bounds.LargestInt-1), 36500*24*time.Hour)},
		),
	},
	{
		// A key function's error reaches the error hook, and the request falls back to
		// the client's IP: a failing key function never turns limiting off.
		Name: "key-function-error-reaches-the-hook",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			failing := func(core.Request) (string, error) { return "", errKeyDown }
			return one("/a", perMinute(1, core.WithKey(failing), p.ErrorHook()))
		},
		Steps: fixed(ok("/a"), refused("/a"), from("192.0.2.8:1", ok("/a"))),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			if len(p.Errors) != 3 || !errors.Is(p.Errors[0], errKeyDown) {
				t.Errorf("error hook saw %v, want 3 errors wrapping the key function's", p.Errors)
			}
		},
	},
}

var errKeyDown = errors.New("session store down")

const trillion = min(1_000_000_000_000, math.MaxInt)

// resetWithin checks a RateLimit field that starts with prefix and ends with t: a bounded
// rate (counts above bounds.LargestExact) holds a grant until its bucket, a hundredth of the
// period, has left the window, so t lies between the period and a hundredth more.
func resetWithin(prefix string, period time.Duration) func(http.Header) error {
	return func(h http.Header) error {
		v := h.Get("RateLimit")
		rest, ok := strings.CutPrefix(v, prefix)
		t, err := strconv.ParseInt(rest, 10, 64)
		lo, hi := int64(period/time.Second), int64(period/time.Second)*101/100+1
		if !ok || err != nil || t < lo || t > hi {
			return fmt.Errorf("RateLimit %q, want %s followed by %d to %d", v, prefix, lo, hi)
		}
		return nil
	}
}

// members returns a Step check that the RateLimit-Policy and RateLimit fields, all their
// lines together, hold exactly the members given, in any order; "*" in a wanted member
// matches any run of characters but '"', ';' and ','.
func members(policy, rateLimit []string) func(http.Header) error {
	return func(h http.Header) error {
		for _, f := range []struct {
			name string
			want []string
		}{{"RateLimit-Policy", policy}, {"RateLimit", rateLimit}} {
			var got []string
			for _, line := range h.Values(f.name) {
				for _, m := range strings.Split(line, ",") {
					got = append(got, strings.TrimSpace(m))
				}
			}
			if len(got) != len(f.want) {
				return fmt.Errorf("%s members %q, want %q", f.name, got, f.want)
			}
			left := slices.Clone(got)
			for _, w := range f.want {
				re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(w), `\*`, `[^";,]+`) + "$")
				i := slices.IndexFunc(left, re.MatchString)
				if i < 0 {
					return fmt.Errorf("%s members %q: none is %q", f.name, got, w)
				}
				left = slices.Delete(left, i, i+1)
			}
		}
		return nil
	}
}
