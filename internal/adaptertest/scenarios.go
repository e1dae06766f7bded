package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// H builds a Request header list from name, value pairs.
func H(kv ...string) []string { return kv }

// one returns an app with a single route behind one limit.
func one(path string, l Limit) App { return App{Routes: []Route{{Path: path, Limits: []Limit{l}}}} }

// perMinute is the limit "n per minute" with opts.
func perMinute(n int, opts ...core.Option) Limit {
	return Limit{Count: n, Period: time.Minute, Opts: opts}
}

func ok(path string, hdr ...string) Step {
	return Step{Request: Request{Path: path, Header: hdr}, Status: 200}
}

func refused(path string, hdr ...string) Step {
	return Step{Request: Request{Path: path, Header: hdr}, Status: 429}
}

func from(remote string, st Step) Step { st.Remote = remote; return st }

func fixed(steps ...Step) func(Traits) []Step { return func(Traits) []Step { return steps } }

const xff = "X-Forwarded-For"

// Scenarios is the suite's table.
var Scenarios = []Scenario{
	{
		Name: "limit-then-429-with-exact-headers",
		App:  func(Traits, Adapter, *Probe) App { return one("/user/test", perMinute(3)) },
		Steps: fixed(
			Step{Request: Request{Path: "/user/test"}, Status: 200, Body: "ok", Header: map[string]string{
				"RateLimit-Policy": `"3/1m";q=3;w=60`, "RateLimit": `"3/1m";r=2;t=60`, "Retry-After": ""}},
			Step{Request: Request{Path: "/user/test"}, Status: 200, Header: map[string]string{"RateLimit": `"3/1m";r=1;t=60`}},
			Step{Request: Request{Path: "/user/test"}, Status: 200, Header: map[string]string{"RateLimit": `"3/1m";r=0;t=60`}},
			Step{Request: Request{Path: "/user/test"}, Status: 429, Body: "Too Many Requests\n", Header: map[string]string{
				"RateLimit-Policy": `"3/1m";q=3;w=60`, "RateLimit": `"3/1m";r=0;t=60`, "Retry-After": "60"}},
		),
		Check: nil,
	},
	{
		Name: "refusal-is-plain-text",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1)) },
		Steps: fixed(ok("/a"), Step{Request: Request{Path: "/a"}, Status: 429,
			Header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}}),
	},
	{
		Name: "isolation-per-ip",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1)) },
		Steps: fixed(from("192.0.2.1:1", ok("/a")), from("192.0.2.1:2", refused("/a")),
			from("192.0.2.2:1", ok("/a")), from("[2001:db8::1]:1", ok("/a"))),
	},
	{
		Name: "isolation-per-route",
		App: func(Traits, Adapter, *Probe) App {
			return App{Routes: []Route{{Path: "/a", Limits: []Limit{perMinute(1)}}, {Path: "/b", Limits: []Limit{perMinute(1)}}}}
		},
		Steps: fixed(ok("/a"), refused("/a"), ok("/b"), refused("/b")),
	},
	{
		Name:  "params-share-the-route-bucket",
		App:   func(Traits, Adapter, *Probe) App { return one("/user/:id", perMinute(2)) },
		Steps: fixed(ok("/user/1"), ok("/user/2"), refused("/user/3"), refused("/user/1")),
	},
	{
		// Same scope, different policies: the policy is part of the bucket.
		Name: "isolation-per-policy",
		App: func(Traits, Adapter, *Probe) App {
			s := core.WithScope("shared")
			return App{Routes: []Route{
				{Path: "/a", Limits: []Limit{perMinute(1, s)}},
				{Path: "/b", Limits: []Limit{perMinute(2, s)}},
				{Path: "/c", Limits: []Limit{perMinute(1, s)}},
			}}
		},
		Steps: fixed(ok("/a"), ok("/b"), ok("/b"), refused("/b"), refused("/c")),
	},
	{
		Name: "two-rates-on-one-route",
		App: func(Traits, Adapter, *Probe) App {
			return App{Routes: []Route{
				{Path: "/search", Limits: []Limit{{Count: 2, Period: time.Second, Opts: []core.Option{core.WithRate(3, time.Minute)}}}},
				{Path: "/find", Limits: []Limit{{Policy: "2/1s, 3/1m"}}},
			}}
		},
		Steps: func(Traits) []Step {
			var steps []Step
			for _, p := range []string{"/search", "/find"} {
				pol := `"2/1s";q=2;w=1, "3/1m";q=3;w=60`
				steps = append(steps,
					Step{Request: Request{Path: p}, Status: 200, Header: map[string]string{"RateLimit-Policy": pol, "RateLimit": `"2/1s";r=1;t=1`}},
					Step{Request: Request{Path: p}, Status: 200, Header: map[string]string{"RateLimit": `"2/1s";r=0;t=1`}},
					Step{Request: Request{Path: p}, Status: 429, Header: map[string]string{"RateLimit-Policy": pol, "Retry-After": "1"}},
				)
			}
			return steps
		},
	},
	{
		Name: "two-limits-stacked-on-one-route",
		App: func(Traits, Adapter, *Probe) App {
			return App{Routes: []Route{{Path: "/a", Limits: []Limit{perMinute(3), perMinute(1, core.WithScope("tight"))}}}}
		},
		Steps: fixed(ok("/a"), refused("/a")),
	},
	{
		Name: "forged-forwarded-headers-ignored-by-default",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1)) },
		Steps: fixed(
			ok("/a", xff, "203.0.113.1"),
			refused("/a", xff, "203.0.113.2"),
			refused("/a", "X-Real-IP", "203.0.113.3"),
			refused("/a", "Forwarded", "for=203.0.113.4"),
			refused("/a", xff, "203.0.113.5", "X-Real-IP", "203.0.113.6", "Forwarded", `for="[2001:db8::9]"`),
			from("192.0.2.8:1", ok("/a", xff, "203.0.113.1")),
		),
	},
	{
		Name: "trusted-proxies-in-core",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithTrustedProxies("10.0.0.0/8")))
		},
		Steps: trustedProxySteps(true),
	},
	{
		Name: "trusted-proxies-in-the-framework",
		Skip: func(tr Traits) string {
			if !tr.FrameworkTrust {
				return tr.Name + " has no trusted-proxy mechanism of its own"
			}
			return ""
		},
		App: func(Traits, Adapter, *Probe) App {
			app := one("/a", perMinute(1))
			app.TrustProxies = []string{"10.0.0.0/8"}
			return app
		},
		Steps: trustedProxySteps(false),
	},
	{
		Name: "ipv6-grouped-by-64",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1)) },
		Steps: fixed(from("[2001:db8::1]:1", ok("/a")), from("[2001:db8::ffff:2]:1", refused("/a")),
			from("[2001:db8:0:1::1]:1", ok("/a")), from("[::ffff:192.0.2.9]:1", ok("/a")), from("192.0.2.9:2", refused("/a"))),
	},
	{
		Name: "ipv6-per-address-with-128",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1, core.WithIPv6Prefix(128))) },
		Steps: fixed(from("[2001:db8::1]:1", ok("/a")), from("[2001:db8::2]:1", ok("/a")),
			from("[2001:db8::1]:2", refused("/a"))),
	},
	{
		// Garbage peers never crash and never turn limiting off: each still has a bucket.
		Name: "garbage-remote-addresses",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1)) },
		Steps: fixed(
			from(NoRemote, ok("/a")), from(NoRemote, refused("/a")),
			from("@", ok("/a")), from("@", refused("/a")),
			from("192.0.2.1", ok("/a")), from("192.0.2.1:9", refused("/a")),
			from("[fe80::1%eth0]:80", ok("/a")), from("fe80::1%eth0", refused("/a")), from("[fe80::2%lo]:1", refused("/a")),
			from("not an address", ok("/a")), from("not an address", refused("/a")),
		),
	},
	{
		Name: "skip",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithSkip(func(r core.Request) bool { return r.Header("X-Skip") == "1" })))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a", Header: H("X-Skip", "1")}, Status: 200, Header: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}},
			ok("/a", "X-Skip", "1"),
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": `"1/1m";r=0;t=60`}},
			refused("/a"),
			ok("/a", "X-Skip", "1"),
		),
	},
	{
		// Clients on the allow list are neither counted nor given fields, and the address
		// is the one the key would use: a forged header cannot claim an exempt address,
		// while a trusted proxy's word for its client counts.
		Name: "allow-list-exempts-clients-by-address",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithAllowList("192.0.2.0/24", "2001:db8::1"), core.WithTrustedProxies("10.0.0.0/8")))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}},
			ok("/a"), ok("/a"),
			from("[2001:db8::1]:1", ok("/a")), from("[2001:db8::1]:1", ok("/a")),
			from("198.51.100.1:1", ok("/a", xff, "192.0.2.7")),
			from("198.51.100.1:1", refused("/a", xff, "192.0.2.7")),
			from("198.51.100.1:1", refused("/a", "X-Real-IP", "192.0.2.7", "Forwarded", "for=192.0.2.7")),
			from("[2001:db8::2]:1", ok("/a")), from("[2001:db8::2]:1", refused("/a")),
			from("10.0.0.1:1", ok("/a", xff, "192.0.2.9")), from("10.0.0.1:1", ok("/a", xff, "192.0.2.9")),
			from("10.0.0.1:1", ok("/a", xff, "192.0.2.9, 198.51.100.2")),
			from("10.0.0.1:1", refused("/a", xff, "192.0.2.9, 198.51.100.2")),
		),
	},
	{
		// A Quota reaches the limit's buckets outside requests: Peek reports without
		// spending, Reset forgets the client's grants.
		Name: "quota-peeks-and-resets",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/login", perMinute(2, core.WithScope("login"), core.WithQuota(&p.Quota)))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/login"}, Status: 200, Do: peek(2, 0)},
			ok("/login"),
			Step{Request: Request{Path: "/login"}, Status: 429, Do: peek(0, time.Minute)},
			Step{Request: Request{Path: "/login"}, Status: 200, Header: map[string]string{"RateLimit": `"2/1m";r=1;t=60`},
				Do: func(p *Probe) error { return p.Quota.Reset(context.Background(), "192.0.2.7") }},
			from("198.51.100.1:1", ok("/login")),
		),
	},
	{
		// The policy is chosen per request from tiers declared up front; a request with
		// no tier, or an unknown one, gets the limit's own policy, never no limit.
		Name: "tiers-pick-the-policy-per-request",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			plan := func(r core.Request) string { return r.Header("X-Plan") }
			return one("/a", perMinute(1, p.Observer(), core.WithTiers(plan, map[string]string{"paid": "3/1m", "internal": "unlimited"})))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": `"1/1m";r=0;t=60`, "RateLimit-Policy": `"1/1m";q=1;w=60`}},
			refused("/a"),
			Step{Request: Request{Path: "/a", Header: H("X-Plan", "paid")}, Status: 200, Header: map[string]string{"RateLimit": `"3/1m";r=2;t=60`, "RateLimit-Policy": `"3/1m";q=3;w=60`}},
			ok("/a", "X-Plan", "paid"), ok("/a", "X-Plan", "paid"),
			Step{Request: Request{Path: "/a", Header: H("X-Plan", "paid")}, Status: 429, Header: map[string]string{"RateLimit": `"3/1m";r=0;t=60`, "Retry-After": "60"}},
			Step{Request: Request{Path: "/a", Header: H("X-Plan", "internal")}, Status: 200, Header: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}},
			ok("/a", "X-Plan", "internal"), ok("/a", "X-Plan", "internal"),
			refused("/a", "X-Plan", "bogus"),
		),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			var got []string
			for _, e := range p.Events {
				got = append(got, e.Policy.String()+" "+e.Outcome.String())
			}
			want := []string{"1/1m admitted", "1/1m refused", "3/1m admitted", "3/1m admitted", "3/1m admitted", "3/1m refused", "1/1m refused"}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Errorf("events %q, want %q", got, want)
			}
		},
	},
	{
		Name: "dry-run",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithDryRun(), p.Observer()))
		},
		Steps: fixed(ok("/a"), Step{Request: Request{Path: "/a"}, Status: 200, Body: "ok",
			Header: map[string]string{"RateLimit": `"1/1m";r=0;t=60`}}),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			if len(p.Events) != 2 || p.Events[1].Outcome != core.Refused || !p.Events[1].DryRun {
				t.Errorf("events %+v, want the second Refused in dry run", p.Events)
			}
		},
	},
	{
		Name: "custom-deny-in-the-framework-idiom",
		App: func(_ Traits, a Adapter, _ *Probe) App {
			return one("/a", perMinute(1, a.WithDenyHandler(503, "slow down")))
		},
		Steps: fixed(ok("/a"), Step{Request: Request{Path: "/a"}, Status: 503, Body: "slow down",
			Header: map[string]string{"X-Wait": "60", "Retry-After": "60", "RateLimit": `"1/1m";r=0;t=60`}}),
	},
	{
		// A deny function that writes nothing must not turn the refusal into a 200 (which
		// a cache or a client would take for an answer): the default refusal follows,
		// with the fields and headers the function set.
		Name: "custom-deny-that-writes-nothing-leaves-the-default-refusal",
		App: func(_ Traits, a Adapter, _ *Probe) App {
			return one("/a", perMinute(1, a.WithDenyHandler(0, "")))
		},
		Steps: fixed(ok("/a"), Step{Request: Request{Path: "/a"}, Status: 429, Body: "Too Many Requests\n",
			Header: map[string]string{"X-Wait": "60", "Retry-After": "60", "RateLimit": `"1/1m";r=0;t=60`}}),
	},
	{
		// A deny handler answers refusals over the limit only: an outage under FailClosed
		// keeps its 503 and a cost above the limit its 413, which a handler written for
		// 429 would make read as the client's excess.
		Name: "custom-deny-leaves-an-outage-and-a-cost-above-the-limit-their-own-answers",
		App: func(_ Traits, a Adapter, p *Probe) App {
			deny := a.WithDenyHandler(429, "slow down")
			five := core.WithCost(func(core.Request) int { return 5 })
			return App{Routes: []Route{
				{Path: "/down", Limits: []Limit{perMinute(1, core.WithStore(FailingStore{}), core.WithFailMode(core.FailClosed), deny, p.ErrorHook())}},
				{Path: "/costly", Limits: []Limit{perMinute(2, five, deny, p.ErrorHook())}},
				{Path: "/a", Limits: []Limit{perMinute(1, deny)}},
			}}
		},
		Steps: fixed(
			Step{Request: Request{Path: "/down"}, Status: 503, Body: "Service Unavailable\n", Header: map[string]string{"Retry-After": "1"}},
			Step{Request: Request{Path: "/costly"}, Status: 413, Body: "Request Cost Exceeds The Limit\n", Header: map[string]string{"Retry-After": ""}},
			ok("/a"),
			Step{Request: Request{Path: "/a"}, Status: 429, Body: "slow down", Header: map[string]string{"Retry-After": "60"}},
		),
	},
	{
		Name: "custom-deny-response",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithDenyResponse(503, "busy\n")))
		},
		Steps: fixed(ok("/a"), Step{Request: Request{Path: "/a"}, Status: 503, Body: "busy\n",
			Header: map[string]string{"Retry-After": "60"}}),
	},
	{
		Name: "key-by-header",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(1, core.WithKey(core.KeyByHeader("X-API-Token"))))
		},
		Steps: fixed(
			from("192.0.2.1:1", ok("/a", "X-API-Token", "t1")),
			from("192.0.2.2:1", refused("/a", "X-API-Token", "t1")),
			from("192.0.2.1:1", ok("/a", "X-API-Token", "t2")),
			from("192.0.2.1:1", ok("/a")), // no token: keyed by IP, apart from the tokens
			from("192.0.2.1:1", refused("/a")),
			from("192.0.2.1:1", ok("/a", "X-API-Token", "192.0.2.3")),
			from("192.0.2.3:1", ok("/a")), // a token spelled like an IP is not that IP
		),
	},
	{
		Name: "key-by-value",
		App: func(tr Traits, _ Adapter, _ *Probe) App {
			app := one("/a", perMinute(1, core.WithKey(core.KeyByValue(tr.ValueKey))))
			app.ValueFromHeader = "X-User"
			return app
		},
		Steps: fixed(
			from("192.0.2.1:1", ok("/a", "X-User", "u1")),
			from("192.0.2.2:1", refused("/a", "X-User", "u1")),
			from("192.0.2.2:1", ok("/a", "X-User", "u2")),
			from("192.0.2.2:1", ok("/a")),
		),
	},
	{
		// A proxy on the application's host that nobody trusted: every client behind it
		// shares its bucket, which the limit cannot refuse to do, so it warns, once,
		// naming the fix, on every adapter, whether or not it builds the whole request.
		Name: "forwarded-header-from-an-untrusted-local-peer-warns-once",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(2, p.ErrorHook()))
		},
		Steps: fixed(
			from("127.0.0.1:5000", ok("/a", xff, "198.51.100.1")),
			from("127.0.0.1:5001", ok("/a", xff, "198.51.100.2")),
			from("127.0.0.1:5002", refused("/a", xff, "198.51.100.3")),
		),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Error(), `core.WithTrustedProxies("127.0.0.1")`) ||
				!strings.Contains(p.Errors[0].Error(), `/a"`) {
				t.Errorf("error hook saw %q, want one warning naming core.WithTrustedProxies(\"127.0.0.1\") and the route", p.Errors)
			}
		},
	},
	{
		Name: "store-error-fail-open",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithStore(FailingStore{}), p.ErrorHook(), p.Observer()))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": "", "Retry-After": ""}},
			ok("/a"),
		),
		Check: func(t *testing.T, _ Traits, p *Probe) {
			if len(p.Errors) != 2 {
				t.Fatalf("error hook saw %d errors, want 2", len(p.Errors))
			}
			if !errors.Is(p.Errors[0], ErrStoreDown) {
				t.Errorf("error hook got %v, want it to wrap the store's error", p.Errors[0])
			}
			if len(p.Events) != 2 || p.Events[0].Outcome != core.Errored {
				t.Errorf("events %+v, want two Errored", p.Events)
			}
		},
	},
	{
		// An outage is the service's, not the client's excess: 503 and its own text, with a
		// short Retry-After, unless WithFailStatus says otherwise.
		Name: "store-error-fail-closed-503-by-default",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithStore(FailingStore{}), core.WithFailMode(core.FailClosed), p.ErrorHook()))
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 503, Body: "Service Unavailable\n",
			Header: map[string]string{"Retry-After": "1", "Content-Type": "text/plain; charset=utf-8"}}),
	},
	{
		Name: "store-error-fail-closed-429-with-fail-status",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithStore(FailingStore{}), core.WithFailMode(core.FailClosed), core.WithFailStatus(429), p.ErrorHook()))
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 429, Body: "Too Many Requests\n", Header: map[string]string{"Retry-After": "1"}}),
	},
	{
		// A request costing more than the limit is refused with 413 however the store
		// fails and whatever the fail mode: it could never be admitted, and FailOpen or
		// FailLocal would otherwise let it through uncounted.
		Name: "cost-above-the-limit-refused-when-the-store-fails",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			five := core.WithCost(func(core.Request) int { return 5 })
			route := func(path string, m core.FailMode) Route {
				return Route{Path: path, Limits: []Limit{perMinute(2, core.WithStore(FailingStore{}), core.WithFailMode(m), five, p.ErrorHook())}}
			}
			return App{Routes: []Route{route("/open", core.FailOpen), route("/closed", core.FailClosed), route("/local", core.FailLocal)}}
		},
		Steps: fixed(
			Step{Request: Request{Path: "/open"}, Status: 413, Header: map[string]string{"Retry-After": ""}},
			Step{Request: Request{Path: "/closed"}, Status: 413, Header: map[string]string{"Retry-After": ""}},
			Step{Request: Request{Path: "/local"}, Status: 413, Header: map[string]string{"Retry-After": ""}},
		),
	},
	{
		Name: "store-error-fail-closed-500-with-fail-status",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithStore(FailingStore{}), core.WithFailMode(core.FailClosed), core.WithFailStatus(500), p.ErrorHook()))
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 500, Body: "Internal Server Error\n", Header: map[string]string{"Retry-After": "1"}}),
	},
	{
		Name: "store-error-fail-local",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/a", perMinute(1, core.WithStore(FailingStore{}), core.WithFailMode(core.FailLocal), p.ErrorHook()))
		},
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": `"1/1m";r=0;t=60`}},
			Step{Request: Request{Path: "/a"}, Status: 429, Header: map[string]string{"Retry-After": "60"}},
			from("192.0.2.8:1", ok("/a")),
		),
	},
	{
		Name: "observer-events",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return one("/user/:id", perMinute(1, p.Observer()))
		},
		Steps: fixed(ok("/user/1"), refused("/user/2")),
		Check: func(t *testing.T, tr Traits, p *Probe) {
			route := tr.Pattern("/user/:id")
			want := []core.Event{{Outcome: core.Admitted, Scope: route, Key: "192.0.2.7"}, {Outcome: core.Refused, Scope: route, Key: "192.0.2.7"}}
			if len(p.Events) != len(want) {
				t.Fatalf("events %+v, want %d", p.Events, len(want))
			}
			for i, e := range p.Events {
				if e.Outcome != want[i].Outcome || e.Scope != want[i].Scope || e.Key != want[i].Key || e.DryRun {
					t.Errorf("event %d: %v %q %q, want %v %q %q", i, e.Outcome, e.Scope, e.Key, want[i].Outcome, want[i].Scope, want[i].Key)
				}
			}
			if p.Events[1].Decision.Allowed || p.Events[1].Decision.Rate.Count != 1 {
				t.Errorf("refusal's decision %+v", p.Events[1].Decision)
			}
		},
	},
	{
		Name: "headers-off",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(1, core.WithHeaders(core.HeadersOff))) },
		Steps: fixed(
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"RateLimit": "", "RateLimit-Policy": "", "X-RateLimit-Limit": ""}},
			Step{Request: Request{Path: "/a"}, Status: 429, Header: map[string]string{"RateLimit": "", "Retry-After": "60"}},
		),
	},
	{
		Name: "headers-legacy",
		App: func(Traits, Adapter, *Probe) App {
			return one("/a", perMinute(2, core.WithHeaders(core.HeadersLegacy)))
		},
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{
			"RateLimit": "", "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1"},
			Check: func(h http.Header) error {
				// X-RateLimit-Reset is unix seconds: a minute from now, give or take the run.
				reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
				if now := time.Now().Unix(); err != nil || reset < now+59 || reset > now+61 {
					return fmt.Errorf("X-RateLimit-Reset %q, want about %d", h.Get("X-RateLimit-Reset"), now+60)
				}
				return nil
			}}),
	},
	{
		Name: "headers-both",
		App:  func(Traits, Adapter, *Probe) App { return one("/a", perMinute(2, core.WithHeaders(core.HeadersBoth))) },
		Steps: fixed(Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{
			"RateLimit": `"2/1m";r=1;t=60`, "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1"}}),
	},
	{
		// The legacy fields hold one value each: where limits stack, the one with the
		// fewest left stands, whichever ran last, so that Remaining never names room
		// another limit lacks.
		Name: "stacked-legacy-fields-show-the-fewest-left",
		App: func(Traits, Adapter, *Probe) App {
			legacy := core.WithHeaders(core.HeadersLegacy)
			return App{Use: []Limit{perMinute(2, legacy)}, Routes: []Route{
				{Path: "/a", Limits: []Limit{perMinute(10, legacy)}},
				{Path: "/b", Limits: []Limit{perMinute(1, legacy)}},
			}}
		},
		// (Under Fiber's app.Use the app-wide limit's bucket is one for all routes: after
		// /b, /a has 0 left there, 1 elsewhere; either way the app-wide limit stands.)
		Steps: fixed(
			Step{Request: Request{Path: "/b"}, Status: 200, Header: map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0"}},
			Step{Request: Request{Path: "/a"}, Status: 200, Header: map[string]string{"X-RateLimit-Limit": "2"}},
		),
	},
	{
		// Mounted app-wide, each route keeps its own bucket (and /user/:id one for all
		// ids) — except under Fiber's app.Use, which reports only the Use prefix: there
		// every route shares one bucket per client, stricter, never looser.
		Name: "mounted-app-wide",
		App: func(Traits, Adapter, *Probe) App {
			return App{Use: []Limit{perMinute(1)}, Routes: []Route{{Path: "/a"}, {Path: "/b"}, {Path: "/user/:id"}}}
		},
		Steps: func(tr Traits) []Step {
			if tr.UseSharesBucket {
				return []Step{ok("/a"), refused("/a"), refused("/b"), refused("/user/1"), from("192.0.2.8:1", ok("/b"))}
			}
			return []Step{ok("/a"), refused("/a"), ok("/b"), refused("/b"), ok("/user/1"), refused("/user/2")}
		},
	},
}

// trustedProxySteps: behind a trusted proxy the forwarded client counts; from anyone else
// forwarded headers are ignored. inCore adds what core's own walk does with garbage.
func trustedProxySteps(inCore bool) func(Traits) []Step {
	return func(tr Traits) []Step {
		xff := xff
		if !inCore && tr.TrustHeader != "" {
			xff = tr.TrustHeader
		}
		steps := []Step{
			from("10.0.0.1:1", ok("/a", xff, "203.0.113.9")),
			from("10.0.0.2:1", refused("/a", xff, "203.0.113.9")), // same client, other proxy
			from("10.0.0.1:1", ok("/a", xff, "203.0.113.10")),
			from("192.0.2.1:1", ok("/a", xff, "203.0.113.11")), // untrusted peer: its XFF is forged
			from("192.0.2.1:1", refused("/a", xff, "203.0.113.12")),
			from("10.0.0.3:1", ok("/a")), // a trusted peer without XFF is the client
			from("10.0.0.3:1", refused("/a")),
			// Garbage from a trusted proxy never mints buckets: it falls back to the proxy.
			from("10.0.0.4:1", ok("/a", xff, "garbage-1")),
			from("10.0.0.4:1", refused("/a", xff, "garbage-2")),
		}
		if inCore {
			steps = append(steps,
				// Forged leftmost entries before the trusted hops do not count.
				from("10.0.0.1:1", ok("/a", xff, "198.51.100.1, 203.0.113.20")),
				from("10.0.0.1:1", refused("/a", xff, "198.51.100.2, 203.0.113.20")),
				from("10.0.0.1:1", refused("/a", xff, "198.51.100.3", xff, "203.0.113.20")),
				// Core's walk stops at garbage and keys by the last good hop.
				from("10.0.0.4:1", ok("/a", xff, "garbage-3, 10.0.0.9")),
				from("10.0.0.9:1", refused("/a")),
			)
		} else {
			// The frameworks fall back to the peer.
			steps = append(steps, from("10.0.0.4:1", refused("/a", xff, "garbage-3, 10.0.0.9")))
			if xff == "X-Forwarded-For" {
				// A client-written entry left of the proxy's own must not choose the bucket.
				steps = append(steps,
					from("10.0.0.1:1", ok("/a", xff, "198.51.100.1, 203.0.113.20")),
					from("10.0.0.1:1", refused("/a", xff, "198.51.100.2, 203.0.113.20")))
			} else {
				// A forged X-Forwarded-For beside the proxy's header is not read.
				steps = append(steps, from("10.0.0.1:1", refused("/a", xff, "203.0.113.9", "X-Forwarded-For", "198.51.100.3")))
				// A proxy that appends its line after the client's: the last line counts.
				steps = append(steps,
					from("10.0.0.1:1", ok("/a", xff, "198.51.100.30", xff, "203.0.113.40")),
					from("10.0.0.1:1", refused("/a", xff, "198.51.100.31", xff, "203.0.113.40")))
			}
		}
		return steps
	}
}

// peek returns a Step.Do that peeks at DefaultRemote's quota, expecting remaining and a
// wait of at most wait (and more than none when wait is not 0).
func peek(remaining int, wait time.Duration) func(*Probe) error {
	return func(p *Probe) error {
		d, err := p.Quota.Peek(context.Background(), "192.0.2.7")
		if err != nil {
			return err
		}
		if d.Remaining != remaining || d.RetryAfter > wait || (wait > 0) != (d.RetryAfter > 0) {
			return fmt.Errorf("peek: %+v, want %d remaining and a wait of at most %v", d, remaining, wait)
		}
		return nil
	}
}
