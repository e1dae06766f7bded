package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// hookLog collects what a limit's error hook is given.
type hookLog struct {
	mu   sync.Mutex
	errs []string
}

func (h *hookLog) hook(_ context.Context, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err.Error())
}

func (h *hookLog) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// routedReq is req on a route, for the warning's text.
type routedReq struct{ fakeRequest }

func (routedReq) Route() string { return "GET /login" }

// TestForwardedHeaderFromLocalPeerWarnsOnce: behind a proxy that the limit does not trust
// (nginx on the same host or network, no WithTrustedProxies), every client shares the
// proxy's bucket: five clients got 200 200 200 429 429, and nothing was logged. A forwarded
// header from a loopback, private or link-local peer is that proxy's mark: the limit warns
// once, naming the peer, the header and the option that fixes it. The decisions stay what
// they were.
func TestForwardedHeaderFromLocalPeerWarnsOnce(t *testing.T) {
	for _, c := range []struct {
		peer   string
		header string
		opts   []core.Option
		want   string // in the warning: the fix
	}{
		{"127.0.0.1:41234", "X-Forwarded-For", nil, `core.WithTrustedProxies("127.0.0.1")`},
		{"127.0.0.1:0", "X-Forwarded-For", nil, `core.WithTrustedProxies("127.0.0.1")`},
		{"10.1.2.3:80", "X-Real-Ip", nil, `core.WithTrustedProxies("10.1.2.3") with core.WithForwardedHeader("X-Real-IP")`},
		{"172.17.0.1:80", "Forwarded", nil, `core.WithTrustedProxies("172.17.0.1") with core.WithForwardedHeader("Forwarded")`},
		{"172.31.255.1:80", "X-Forwarded-For", nil, `core.WithTrustedProxies("172.31.255.1")`},
		{"192.168.1.9", "X-Forwarded-For", nil, `core.WithTrustedProxies("192.168.1.9")`},
		{"169.254.0.7:80", "X-Forwarded-For", nil, `a link-local address`},
		{"[::1]:80", "X-Forwarded-For", nil, `core.WithTrustedProxies("::1")`},
		{"[fd00::5]:80", "X-Forwarded-For", nil, `a private address`},
		{"[fe80::1%eth0]:80", "X-Forwarded-For", nil, `core.WithTrustedProxies("fe80::1")`},
		{"[::ffff:10.0.0.1]:80", "X-Forwarded-For", nil, `core.WithTrustedProxies("10.0.0.1")`},
		{"@", "X-Forwarded-For", nil, `core.WithTrustedProxies("unix")`},
		{"/run/app.sock", "X-Forwarded-For", nil, `over a unix socket`},
		// Trusted proxies configured, but not this one (a Docker bridge, say).
		{"172.18.0.2:80", "X-Forwarded-For", []core.Option{core.WithTrustedProxies("10.0.0.0/8")}, `core.WithTrustedProxies("172.18.0.2")`},
		// The configured header is named first; another header is named with the fix.
		{"10.0.0.2:80", "X-Forwarded-For", []core.Option{core.WithTrustedProxies("192.0.2.0/24"), core.WithForwardedHeader("X-Real-IP")},
			`core.WithTrustedProxies("10.0.0.2") with core.WithForwardedHeader("X-Forwarded-For")`},
		// A key function that falls back to the client's IP.
		{"10.0.0.3:80", "X-Forwarded-For", []core.Option{core.WithKey(func(core.Request) (string, error) { return "", nil })}, `"10.0.0.3"`},
	} {
		var log hookLog
		l := limiter(t, append([]core.Option{core.WithErrorHook(log.hook)}, c.opts...)...)
		admitted := 0
		for i := range 5 {
			r := routedReq{req(c.header, "198.51.100."+string(rune('1'+i)))}
			v := l.Check(context.Background(), adapter.Input{Route: "GET /login", Peer: c.peer, Request: r}, nil)
			if v.Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("%s %s: %d of 5 admitted, want 3: a warning never changes a decision", c.peer, c.header, admitted)
		}
		errs := log.got()
		if len(errs) != 1 {
			t.Errorf("%s %s: %d warnings for 5 requests, want 1: %q", c.peer, c.header, len(errs), errs)
			continue
		}
		if !strings.Contains(errs[0], c.want) || !strings.Contains(errs[0], "every client behind it shares one bucket") {
			t.Errorf("%s %s: warning %q, want it to say %q and what it costs", c.peer, c.header, errs[0], c.want)
		}
	}
}

// TestForwardedWarningText: the whole line, as the docs quote it.
func TestForwardedWarningText(t *testing.T) {
	var log hookLog
	l := limiter(t, core.WithErrorHook(log.hook))
	l.Check(context.Background(), adapter.Input{Route: "GET /login", Peer: "127.0.0.1:41234",
		Request: routedReq{req("X-Forwarded-For", "198.51.100.1")}}, nil)
	want := `reqlimit: warning: limit 3/1m on "GET /login": a request from 127.0.0.1, a loopback address that ` +
		`core.WithTrustedProxies does not trust carried X-Forwarded-For, which the limit ignores: it keys by the peer, ` +
		`so if the peer is a proxy, every client behind it shares one bucket. Fix: core.WithTrustedProxies("127.0.0.1"), ` +
		`naming the proxy's address or range. For a proxy on this host, which any local process can reach, rather have it ` +
		`set X-Real-IP and read that alone (core.WithForwardedHeader("X-Real-IP")), or reach the app over a unix socket ` +
		`(core.WithTrustedProxies("unix")). Warned once per limit; core.WithWarnings(false) turns warnings off`
	if errs := log.got(); len(errs) != 1 || errs[0] != want {
		t.Errorf("warning %q,\nwant %q", errs, want)
	}
}

// TestForwardedWarningQuietWhenRight: no warning where the configuration is right or the
// header proves nothing: a public peer (any client can send the header, and must not be
// able to fill the log), a trusted proxy, a local peer without the header, warnings off,
// the framework's client IP, a key that does not need the IP.
func TestForwardedWarningQuietWhenRight(t *testing.T) {
	xff := req("X-Forwarded-For", "198.51.100.1", "X-Real-Ip", "198.51.100.1", "Forwarded", "for=198.51.100.1")
	for _, c := range []struct {
		name string
		peer string
		r    core.Request
		opts []core.Option
	}{
		{"public peer", "203.0.113.7:5000", xff, nil},
		{"public IPv6 peer", "[2001:db8::1]:5000", xff, nil},
		{"public peer beside 172.16/12", "172.32.0.1:5000", xff, nil},
		{"public peer beside 172.16/12", "172.15.0.1:5000", xff, nil},
		{"trusted proxy", "10.0.0.1:5000", xff, []core.Option{core.WithTrustedProxies("10.0.0.0/8")}},
		{"trusted loopback proxy", "127.0.0.1:5000", xff, []core.Option{core.WithTrustedProxies("127.0.0.1")}},
		{"trusted unix proxy", "@", xff, []core.Option{core.WithTrustedProxies("unix")}},
		{"local client, no header", "10.0.0.1:5000", req(), nil},
		{"warnings off", "10.0.0.1:5000", xff, []core.Option{core.WithWarnings(false)}},
		{"framework's client IP", "10.0.0.1", xff, []core.Option{core.WithClientIPFromFramework()}},
		{"keyed by token", "10.0.0.1:5000", xff, []core.Option{core.WithKey(func(core.Request) (string, error) { return "t", nil })}},
	} {
		var log hookLog
		l := limiter(t, append([]core.Option{core.WithErrorHook(log.hook)}, c.opts...)...)
		for range 3 {
			l.Check(context.Background(), adapter.Input{Route: "/", Peer: c.peer, Request: c.r}, nil)
		}
		if errs := log.got(); len(errs) != 0 {
			t.Errorf("%s (%s): warned %q, want nothing", c.name, c.peer, errs)
		}
	}
}

// TestForwardedWarningOncePerLimit: once for a limit whatever the requests, the
// goroutines or the tiers that see it; again for another limit.
func TestForwardedWarningOncePerLimit(t *testing.T) {
	var log hookLog
	opts := []core.Option{core.WithErrorHook(log.hook),
		core.WithTiers(func(r core.Request) string { return r.Header("X-Plan") }, map[string]string{"pro": "10/1m"})}
	a, b := limiter(t, opts...), limiter(t, opts...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				plan := ""
				if i%2 == 0 {
					plan = "pro"
				}
				r := req("X-Forwarded-For", "198.51.100.1", "X-Plan", plan)
				a.Check(context.Background(), adapter.Input{Route: "/", Peer: "10.0.0.1:" + string(rune('1'+g)), Request: r}, nil)
			}
		}()
	}
	wg.Wait()
	if n := len(log.got()); n != 1 {
		t.Fatalf("%d warnings from one limit's 400 requests on 8 goroutines and two tiers, want 1", n)
	}
	b.Check(context.Background(), adapter.Input{Route: "/", Peer: "10.0.0.1:1", Request: req("X-Forwarded-For", "198.51.100.1")}, nil)
	if n := len(log.got()); n != 2 {
		t.Errorf("another limit seeing the header: %d warnings in all, want 2", n)
	}
}

// TestForwardedWarningGoesToSlogWithoutAHook: without an error hook the warning is one
// slog line at level Warn.
func TestForwardedWarningGoesToSlogWithoutAHook(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	l, err := adapter.New(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.168.0.10:80", Request: req("X-Real-Ip", "198.51.100.1")}, nil)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, `core.WithTrustedProxies(\"192.168.0.10\") with core.WithForwardedHeader(\"X-Real-IP\")`) {
		t.Errorf("slog got %q, want one Warn line naming the fix", out)
	}
}

// TestWatchingForAProxyAllocatesNothingMore: from a local peer the limit looks for a forwarded
// header on every request until it has warned; the looking, and the request after the
// warning, allocate nothing more than a public peer's request.
func TestWatchingForAProxyAllocatesNothingMore(t *testing.T) {
	noop := core.WithErrorHook(func(context.Context, error) {})
	count := func(peer string, r core.Request) float64 {
		l2, err := adapter.New(1<<30, time.Minute, core.WithStore(core.NewMemoryStore(nil)), noop)
		if err != nil {
			t.Fatal(err)
		}
		in := adapter.Input{Route: "/", Peer: peer, Request: r}
		l2.Check(context.Background(), in, nil) // warned, if it is to warn
		return testing.AllocsPerRun(200, func() { l2.Check(context.Background(), in, nil) })
	}
	base := count("203.0.113.7:5555", req("X-Forwarded-For", "198.51.100.1"))
	for _, c := range []struct {
		peer string
		r    core.Request
	}{
		{"10.0.0.1:5555", req()},                                  // looked at every time
		{"[fd00::1]:5555", req()},                                 // looked at every time
		{"10.0.0.1:5555", req("X-Forwarded-For", "198.51.100.1")}, // warned once, then not looked at
	} {
		if n := count(c.peer, c.r); n > base {
			t.Errorf("%s %v: %v allocations a request, a public peer's %v", c.peer, c.r.(fakeRequest).h, n, base)
		}
	}
}

// TestForwardedWatchStopsAfterManyRequestsWithoutCause: a service called from its own
// network (local peers, no proxy) or from the open internet (public peers, whose headers
// are no sign of a proxy) would have every request's peer parsed and looked at for ever;
// after many such requests the limit stops looking, and a header after that goes
// unremarked. Before that point one is warned of.
func TestForwardedWatchStopsAfterManyRequestsWithoutCause(t *testing.T) {
	xff := req("X-Forwarded-For", "198.51.100.1")
	for _, c := range []struct {
		name      string
		peer      string
		r         core.Request
		forwarded bool
	}{
		{"local peers without a header", "10.0.0.1:1", req(), false},
		{"public peers with one", "203.0.113.7:1", xff, false},
		{"a unix socket's peer without a header", "@", req(), false},
		{"local clients a proxy the framework trusts named", "10.0.0.7:0", xff, true},
	} {
		for _, before := range []int{core.MaxLooks - 1, core.MaxLooks} {
			var log hookLog
			l, _ := adapter.New(1<<20, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithErrorHook(log.hook))
			for range before {
				l.Check(context.Background(), adapter.Input{Route: "/", Peer: c.peer, Forwarded: c.forwarded, Request: c.r}, nil)
			}
			l.Check(context.Background(), adapter.Input{Route: "/", Peer: "10.0.0.1:1", Request: xff}, nil)
			want := 1
			if before == core.MaxLooks {
				want = 0
			}
			if n := len(log.got()); n != want {
				t.Errorf("%s: a header from a local peer after %d requests: %d warnings, want %d", c.name, before, n, want)
			}
		}
	}
}
