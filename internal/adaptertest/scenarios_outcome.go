package adaptertest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/core"
)

// Scenarios about limits that count by outcome (core.WithCountWhen): every admitted
// request takes its slot, and gives it back once its handler has answered with a status
// the limit's rule does not count. The routes answer as each request asks (Route.Answers):
// under Echo and Fiber a failure is a returned error, known only once the error handler
// has run.
func init() { Scenarios = append(Scenarios, outcomeScenarios...) }

// answers is a request to an answering route asking for status, which it must get.
func answers(path string, status int) Step {
	return Step{Request: Request{Path: path, Header: H(StatusHeader, strconv.Itoa(status))}, Status: status}
}

// asksButRefused is a request asking for status that the limit must refuse first.
func asksButRefused(path string, status int) Step {
	st := answers(path, status)
	st.Status = 429
	st.Header = map[string]string{"Retry-After": "60"}
	return st
}

// panics is a request whose handler panics: the harness's recovery answers 500.
func panics(path string) Step {
	return Step{Request: Request{Path: path, Header: H(PanicHeader, "1")}, Status: 500}
}

// rateLimit adds the exact RateLimit field st's response must carry.
func rateLimit(st Step, field string) Step {
	st.Header = map[string]string{"RateLimit": field}
	return st
}

// outcomes returns a Scenario check that the observer saw exactly want, each event as
// "policy outcome" ("3/1m released").
func outcomes(want ...string) func(*testing.T, Traits, *Probe) {
	return func(t *testing.T, _ Traits, p *Probe) {
		p.mu.Lock()
		defer p.mu.Unlock()
		var got []string
		for _, e := range p.Events {
			got = append(got, e.Policy.String()+" "+e.Outcome.String())
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("events\n\t%q\nwant\n\t%q", got, want)
		}
	}
}

// repeat returns n copies of s.
func repeat(n int, s ...string) []string {
	var out []string
	for range n {
		out = append(out, s...)
	}
	return out
}

var outcomeScenarios = []Scenario{
	{
		// A path with no route is answered by the framework (404) after an app-wide limit
		// has run: a limit counting successes gives that slot back, one counting failures
		// keeps it, on every path a client makes up.
		Name: "count-when-settles-unmatched-paths-by-their-404",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return App{Use: []Limit{
				perMinute(2, core.WithCountWhen(core.Succeeded), core.WithScope("served"), p.Observer()),
				perMinute(2, core.WithCountWhen(core.Failed), core.WithScope("failed"), p.Observer()),
			}, Routes: []Route{{Path: "/a"}}}
		},
		Steps: fixed(
			notFound("/x0"), notFound("/x1"),
			Step{Request: Request{Path: "/x2"}, Status: 429, Header: map[string]string{"Retry-After": "60"}},
		),
		Check: outcomes("2/1m admitted", "2/1m admitted", "2/1m released",
			"2/1m admitted", "2/1m admitted", "2/1m released",
			"2/1m admitted", "2/1m refused", "2/1m released"),
	},
	{
		// Login protection: only failures count. The fields are written before the handler
		// runs, so each response shows its own slot taken; a success gives it back, and the
		// next response shows the same remaining again.
		Name: "count-when-failed-counts-only-failures",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return App{Routes: []Route{{Path: "/login", Answers: true,
				Limits: []Limit{perMinute(3, core.WithCountWhen(core.Failed), p.Observer())}}}}
		},
		Steps: fixed(
			rateLimit(answers("/login", 200), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 200), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 200), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 200), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 200), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 401), `"3/1m";r=2;t=60`),
			rateLimit(answers("/login", 401), `"3/1m";r=1;t=60`),
			rateLimit(answers("/login", 401), `"3/1m";r=0;t=60`),
			asksButRefused("/login", 401),
			asksButRefused("/login", 200),
		),
		Check: outcomes(append(append(repeat(5, "3/1m admitted", "3/1m released"),
			repeat(3, "3/1m admitted")...), repeat(2, "3/1m refused")...)...),
	},
	{
		// Only what was served counts: failures (client and server errors alike) give
		// their slot back; a redirect is served.
		Name: "count-when-succeeded-counts-only-successes",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return App{Routes: []Route{{Path: "/a", Answers: true,
				Limits: []Limit{perMinute(2, core.WithCountWhen(core.Succeeded), p.Observer())}}}}
		},
		Steps: fixed(
			rateLimit(answers("/a", 500), `"2/1m";r=1;t=60`),
			rateLimit(answers("/a", 404), `"2/1m";r=1;t=60`),
			rateLimit(answers("/a", 401), `"2/1m";r=1;t=60`),
			rateLimit(answers("/a", 200), `"2/1m";r=1;t=60`),
			rateLimit(answers("/a", 302), `"2/1m";r=0;t=60`),
			asksButRefused("/a", 200),
			asksButRefused("/a", 500),
		),
		Check: outcomes(append(append(repeat(3, "2/1m admitted", "2/1m released"),
			repeat(2, "2/1m admitted")...), repeat(2, "2/1m refused")...)...),
	},
	{
		// A handler that panics has no status of its own (the 500 is the recovery's, outside
		// the limit): its request counts under either rule, and the panic goes on.
		Name: "count-when-panic-counts",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return App{Routes: []Route{
				{Path: "/served", Answers: true, Limits: []Limit{perMinute(2, core.WithCountWhen(core.Succeeded), p.Observer())}},
				{Path: "/failed", Answers: true, Limits: []Limit{perMinute(2, core.WithCountWhen(core.Failed), p.Observer())}},
			}}
		},
		Steps: fixed(
			rateLimit(panics("/served"), `"2/1m";r=1;t=60`),
			rateLimit(panics("/served"), `"2/1m";r=0;t=60`),
			asksButRefused("/served", 200),
			rateLimit(panics("/failed"), `"2/1m";r=1;t=60`),
			rateLimit(panics("/failed"), `"2/1m";r=0;t=60`),
			asksButRefused("/failed", 200),
		),
		Check: outcomes(repeat(2, "2/1m admitted", "2/1m admitted", "2/1m refused")...),
	},
	{
		// An app-wide limit counting failures around a route's limit counting successes:
		// each settles its own slot by its own rule. The route's refusal is a failure the
		// app-wide limit sees, so it counts there.
		Name: "count-when-stacked-limits-settle-apart",
		App: func(_ Traits, _ Adapter, p *Probe) App {
			return App{
				Use:    []Limit{perMinute(4, core.WithCountWhen(core.Failed), p.Observer())},
				Routes: []Route{{Path: "/a", Answers: true, Limits: []Limit{perMinute(2, core.WithCountWhen(core.Succeeded), p.Observer())}}},
			}
		},
		Steps: func(Traits) []Step {
			// fields checks both limits' members: the app-wide one's remaining outer and,
			// when inner is not -1, the route's remaining inner.
			fields := func(st Step, outer, inner int) Step {
				policy, remaining := []string{`"4/1m";q=4;w=60`}, []string{`"4/1m";r=` + strconv.Itoa(outer) + `;t=60`}
				if inner >= 0 {
					policy = append(policy, `"2/1m";q=2;w=60`)
					remaining = append(remaining, `"2/1m";r=`+strconv.Itoa(inner)+`;t=60`)
				}
				st.Check = members(policy, remaining)
				return st
			}
			return []Step{
				fields(answers("/a", 401), 3, 1), // the app-wide limit keeps it; the route gives it back
				fields(answers("/a", 401), 2, 1),
				fields(answers("/a", 200), 1, 1), // the route keeps it; the app-wide limit gives it back
				fields(answers("/a", 200), 1, 0),
				fields(asksButRefused("/a", 200), 1, 0), // the route's 429 counts app-wide: 3 of 4
				fields(asksButRefused("/a", 401), 0, 0), // 4 of 4
				fields(asksButRefused("/a", 200), 0, -1),
			}
		},
		Check: outcomes(
			"4/1m admitted", "2/1m admitted", "2/1m released",
			"4/1m admitted", "2/1m admitted", "2/1m released",
			"4/1m admitted", "2/1m admitted", "4/1m released",
			"4/1m admitted", "2/1m admitted", "4/1m released",
			"4/1m admitted", "2/1m refused",
			"4/1m admitted", "2/1m refused",
			"4/1m refused",
		),
	},
}
