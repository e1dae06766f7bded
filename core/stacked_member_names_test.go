package core_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Limits of one policy stacked on a request name their members by their place on the
// request, whatever order they registered in: the first "3/1m", the second "3/1m#2", the
// third "3/1m#3", and a WithScope limit by its name. Middleware order is the code's, so
// every instance of a build names a member alike, and a client reads which is which.
func TestStackedMemberNamesAreTheirPlacesOnTheRequest(t *testing.T) {
	mem := core.WithStore(core.NewMemoryStore(nil))
	// Registered innermost first: a place among registrations would name them backwards.
	route := adapter.Must(3, time.Minute, mem)
	group := adapter.Must(3, time.Minute, mem)
	global := adapter.Must(3, time.Minute, mem)
	login := adapter.Must(3, time.Minute, mem, core.WithScope("login"))
	for _, c := range []struct {
		name          string
		chain         []adapter.Limiter // outermost first
		policy, limit []string
	}{
		{"two", []adapter.Limiter{global, route},
			[]string{`"3/1m";q=3;w=60`, `"3/1m#2";q=3;w=60`},
			[]string{`"3/1m";r=2;t=60`, `"3/1m#2";r=2;t=60`}},
		{"three", []adapter.Limiter{global, group, route},
			[]string{`"3/1m";q=3;w=60`, `"3/1m#2";q=3;w=60`, `"3/1m#3";q=3;w=60`},
			[]string{`"3/1m";r=1;t=60`, `"3/1m#2";r=2;t=60`, `"3/1m#3";r=1;t=60`}},
		{"scoped", []adapter.Limiter{global, login},
			[]string{`"3/1m";q=3;w=60`, `"3/1m#login";q=3;w=60`},
			[]string{`"3/1m";r=0;t=60`, `"3/1m#login";r=2;t=60`}},
	} {
		h := http.Header{}
		for _, l := range c.chain {
			l.Check(context.Background(), adapter.Input{Route: "/a", Peer: "192.0.2.1:1"}, adapter.HeaderMap(h))
		}
		if got := h.Values("RateLimit-Policy"); !slices.Equal(got, c.policy) {
			t.Errorf("%s: RateLimit-Policy %q, want %q", c.name, got, c.policy)
		}
		if got := h.Values("RateLimit"); !slices.Equal(got, c.limit) {
			t.Errorf("%s: RateLimit %q, want %q", c.name, got, c.limit)
		}
	}
}
