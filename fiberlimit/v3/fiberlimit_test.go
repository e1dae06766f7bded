package fiberlimit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	fiberlog "github.com/gofiber/fiber/v3/log"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// keepingStore keeps every query's Scope and Key, as a store keyed by map[string] would:
// if the adapter handed over strings into fasthttp's reused buffers, the kept ones would
// change under it as later requests arrive.
type keepingStore struct {
	mu   sync.Mutex
	kept [][2]string
	core.Store
}

func (s *keepingStore) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	s.mu.Lock()
	s.kept = append(s.kept, [2]string{q.Scope, q.Key})
	s.mu.Unlock()
	return s.Store.Decide(ctx, q)
}

// trusting is the config of an app behind proxies in 192.0.2.0/24, adaptertest's default
// peer's network, that set header.
func trusting(header string) fiber.Config {
	return fiber.Config{TrustProxy: true, TrustProxyConfig: fiber.TrustProxyConfig{Proxies: []string{"192.0.2.0/24"}}, ProxyHeader: header}
}

func TestKeptStringsAreCopies(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  fiber.Config
		opts []core.Option
		req  func(i int) adaptertest.Request
		key  func(i int) string
	}{
		{
			name: "header-key",
			opts: []core.Option{core.WithKey(core.KeyByHeader("X-API-Token"))},
			req: func(i int) adaptertest.Request {
				return adaptertest.Request{Path: fmt.Sprintf("/k/%d", i), Header: adaptertest.H("X-API-Token", token(i))}
			},
			key: token,
		},
		{
			name: "peer-ip",
			req: func(i int) adaptertest.Request {
				return adaptertest.Request{Path: fmt.Sprintf("/k/%d", i), Remote: fmt.Sprintf("198.51.100.%d:1", i)}
			},
			key: func(i int) string { return fmt.Sprintf("198.51.100.%d", i) },
		},
		{
			name: "proxy-header-ip",
			cfg:  trusting("X-Real-IP"),
			req: func(i int) adaptertest.Request {
				return adaptertest.Request{Path: fmt.Sprintf("/k/%d", i), Header: adaptertest.H("X-Real-IP", fmt.Sprintf("203.0.113.%d", i))}
			},
			key: func(i int) string { return fmt.Sprintf("203.0.113.%d", i) },
		},
		{
			name: "forwarded-for-ip",
			cfg:  trusting(fiber.HeaderXForwardedFor),
			req: func(i int) adaptertest.Request {
				return adaptertest.Request{Path: fmt.Sprintf("/k/%d", i),
					Header: adaptertest.H("X-Forwarded-For", fmt.Sprintf("%s, 2001:db8:%x::1, 192.0.2.9", token(i), i+1))}
			},
			key: func(i int) string { return fmt.Sprintf("2001:db8:%x::/64", i+1) },
		},
		{
			// Key functions reading the path get a copy too.
			name: "path-key",
			opts: []core.Option{core.WithKey(func(r core.Request) (string, error) { return r.Path(), nil })},
			req:  func(i int) adaptertest.Request { return adaptertest.Request{Path: fmt.Sprintf("/k/%d%s", i, token(i))} },
			key:  func(i int) string { return fmt.Sprintf("/k/%d%s", i, token(i)) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &keepingStore{Store: core.NewMemoryStore(nil)}
			app := fiber.New(tc.cfg)
			opts := append([]core.Option{core.WithStore(store)}, tc.opts...)
			app.Get("/k/:id", fiberlimit.Limit(1000, time.Minute, opts...), ok)
			send := serve(app)
			const n = 200
			for i := range n {
				if r := send(tc.req(i)); r.Status != 200 {
					t.Fatalf("request %d: status %d", i, r.Status)
				}
			}
			if len(store.kept) != n {
				t.Fatalf("store saw %d queries, want %d", len(store.kept), n)
			}
			// The scope is the route, then what names the limit's buckets apart from other
			// limits' (where the limit was registered): the same in every query.
			for i, k := range store.kept {
				if !strings.HasPrefix(k[0], "/k/:id") || k[0] != store.kept[0][0] || k[1] != tc.key(i) {
					t.Fatalf("query %d kept scope %q key %q, want %q (as in the first query, %q) %q", i, k[0], k[1], "/k/:id", store.kept[0][0], tc.key(i))
				}
			}
		})
	}
}

// token varies in length as well as content, so buffers are overwritten at every offset.
func token(i int) string { return fmt.Sprintf("tok-%d-%s", i, "abcdefghij"[:i%11]) }

// Fiber v3's c.IP() believes ProxyHeader from trusted proxies only, but from them it
// returns X-Forwarded-For's leftmost entry (or the raw field), which the client writes. No
// forged header may buy a client a fresh bucket, whether it connects directly or through
// a trusted proxy, under Fiber's default config or its TrustProxy config, with or without
// EnableIPValidation and the opt-in; and through the proxy the client it forwards must
// still be keyed apart from the proxy's other clients (else keying every request by the
// peer would pass).
func TestForgedForwardedHeadersBuyNoBucket(t *testing.T) {
	const (
		proxy  = "10.0.0.1:5000"
		direct = "192.0.2.50:40000"
	)
	// forged lists a client's forgeries; i makes every forged address new.
	forged := func(i int) [][]string {
		a, b := fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("2001:db8:%x::1", i)
		return [][]string{
			{"X-Forwarded-For", a},
			{"X-Forwarded-For", a + ", 203.0.113.200"},
			{"X-Forwarded-For", "203.0.113.200, " + a},
			{"X-Forwarded-For", a, "X-Forwarded-For", b},
			{"X-Forwarded-For", a + ", 10.0.0.9"},
			{"X-Real-IP", a},
			{"X-Real-IP", a, "X-Real-IP", b},
			{"Forwarded", "for=" + a},
			{"X-Forwarded-For", a, "X-Real-IP", b, "Forwarded", `for="[` + b + `]"`, "CF-Connecting-IP", a},
		}
	}
	// viaProxy is what the proxy at 10.0.0.1 passes on for client: for X-Forwarded-For it
	// appends the client to the chain the client sent, as nginx does, in a line of its own
	// or joined to the client's last; for a single-address header it adds its own line
	// after the client's.
	viaProxy := func(header, client string, hdr []string, ownLine bool) []string {
		out := append([]string(nil), hdr...)
		if ownLine || !strings.EqualFold(header, "X-Forwarded-For") {
			return append(out, header, client)
		}
		for i := len(out) - 2; i >= 0; i -= 2 {
			if strings.EqualFold(out[i], header) {
				out[i+1] += ", " + client
				return out
			}
		}
		return append(out, header, client)
	}
	proxies := fiber.TrustProxyConfig{Proxies: []string{"10.0.0.0/8"}}
	for _, c := range []struct {
		name    string
		cfg     fiber.Config
		trusted bool // requests through the proxy are keyed by the forwarded client
	}{
		{"default", fiber.Config{}, false},
		{"proxy-header-without-trust", fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor}, false},
		{"trust-proxy-no-header", fiber.Config{TrustProxy: true, TrustProxyConfig: proxies}, false},
		{"trust-proxy-forwarded-for", fiber.Config{TrustProxy: true, TrustProxyConfig: proxies, ProxyHeader: fiber.HeaderXForwardedFor}, true},
		{"trust-proxy-forwarded-for-validated", fiber.Config{TrustProxy: true, TrustProxyConfig: proxies, ProxyHeader: fiber.HeaderXForwardedFor, EnableIPValidation: true}, true},
		{"trust-proxy-real-ip", fiber.Config{TrustProxy: true, TrustProxyConfig: proxies, ProxyHeader: "X-Real-IP"}, true},
		{"trust-proxy-forwarded", fiber.Config{TrustProxy: true, TrustProxyConfig: proxies, ProxyHeader: "Forwarded"}, false},
	} {
		for _, optIn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/opt-in=%v", c.name, optIn), func(t *testing.T) {
				opts := []core.Option{core.WithStore(core.NewMemoryStore(nil))}
				if optIn {
					opts = append(opts, core.WithClientIPFromFramework())
				}
				app := fiber.New(c.cfg)
				app.Get("/a", fiberlimit.Limit(1, time.Minute, opts...), ok)
				send := serve(app)
				status := func(peer string, hdr []string) int {
					return send(adaptertest.Request{Path: "/a", Remote: peer, Header: hdr}).Status
				}
				// A client connecting directly uses its quota up, then forges.
				if got := status(direct, nil); got != 200 {
					t.Fatalf("first request from %s: status %d", direct, got)
				}
				for i := range 3 {
					for _, hdr := range forged(i + 1) {
						if got := status(direct, hdr); got != 429 {
							t.Fatalf("from untrusted %s, quota used up, forging %q: status %d, want 429", direct, hdr, got)
						}
					}
				}
				// Clients behind the proxy.
				header := c.cfg.ProxyHeader
				if header == "" || !c.trusted {
					header = "X-Forwarded-For"
				}
				for n, ownLine := range []bool{false, true} {
					client := fmt.Sprintf("203.0.113.%d", 10+n)
					want := 200
					if !c.trusted && n > 0 {
						want = 429 // keyed by the proxy, whose quota the first client used
					}
					if got := status(proxy, viaProxy(header, client, nil, ownLine)); got != want {
						t.Fatalf("client %s through the proxy: status %d, want %d", client, got, want)
					}
					for i := range 3 {
						for _, hdr := range forged(10*n + i + 10) {
							hdr := viaProxy(header, client, hdr, ownLine)
							if got := status(proxy, hdr); got != 429 {
								t.Fatalf("client %s through the proxy, quota used up, forging %q: status %d, want 429", client, hdr, got)
							}
						}
					}
				}
			})
		}
	}
}

// The adapter decides trust itself, for the peer and for each hop of a chain, so as not
// to allocate: it must decide as c.IsProxyTrusted does, for every kind of entry in
// TrustProxyConfig. The peer's trust shows in whether X-Real-IP keys the request; a hop's
// in whether X-Forwarded-For's walk from a trusted unix socket passes over it.
func TestTrustMatchesFiber(t *testing.T) {
	// Fiber warns of the entries it cannot parse, which are here on purpose.
	fiberlog.SetOutput(io.Discard)
	t.Cleanup(func() { fiberlog.SetOutput(os.Stderr) })
	configs := []fiber.TrustProxyConfig{
		{},
		{Proxies: []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::1", "2001:DB8::2", "::ffff:198.51.100.1", "2001:db8:1::/48",
			"::ffff:172.16.0.0/108", "bogus", "300.0.0.0/8", " 192.0.2.3"}},
		{Loopback: true},
		{Private: true},
		{LinkLocal: true},
		{Loopback: true, Private: true, LinkLocal: true, Proxies: []string{"203.0.113.0/24"}},
	}
	peers := []string{"10.1.2.3", "11.0.0.1", "192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1", "2001:db8::2", "198.51.100.1",
		"2001:db8:1:2::3", "2001:db8:2::1", "172.16.0.1", "172.32.0.1", "::ffff:10.0.0.1", "127.0.0.1", "127.9.9.9", "::1",
		"192.168.1.1", "fc00::1", "fd12::1", "169.254.1.1", "fe80::1", "203.0.113.4", "8.8.8.8", "::"}
	const client = "198.18.0.77"
	// send sends GET /t from peer with header: value, and returns what the handler and
	// the limit's observer saw.
	send := func(cfg fiber.TrustProxyConfig, header string) func(from net.Addr, value string) (fiberTrusts bool, key string) {
		var trusted bool
		var key string
		app := fiber.New(fiber.Config{TrustProxy: true, TrustProxyConfig: cfg, ProxyHeader: header})
		observe := core.WithObserver(func(e core.Event) { key = e.Key })
		app.Get("/t", fiberlimit.Limit(1000, time.Minute, core.WithStore(core.NewMemoryStore(nil)), observe),
			func(c fiber.Ctx) error { trusted = c.IsProxyTrusted(); return c.SendStatus(200) })
		h := app.Handler()
		return func(from net.Addr, value string) (bool, string) {
			var req fasthttp.Request
			req.SetRequestURI("/t")
			req.Header.Set(header, value)
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, from, nil)
			trusted, key = false, ""
			h(&ctx)
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("%+v, from %v, %s: %s: status %d", cfg, from, header, value, ctx.Response.StatusCode())
			}
			return trusted, key
		}
	}
	for i, cfg := range configs {
		realIP := send(cfg, "X-Real-IP")
		cfg.UnixSocket = true
		chain := send(cfg, fiber.HeaderXForwardedFor)
		for _, peer := range peers {
			fiberTrusts, key := realIP(&net.TCPAddr{IP: net.ParseIP(peer), Port: 1}, client)
			if adapterTrusts := key == client; adapterTrusts != fiberTrusts {
				t.Errorf("config %d %+v, peer %s: adapter trusts it %v (key %q), c.IsProxyTrusted %v", i, cfg, peer, adapterTrusts, key, fiberTrusts)
			}
			// From a trusted unix socket, peer is the chain's last hop.
			_, key = chain(&net.UnixAddr{Name: "/run/proxy.sock", Net: "unix"}, client+", "+peer)
			if skipped := key == client; skipped != fiberTrusts {
				t.Errorf("config %d %+v, hop %s: the walk passed over it %v (key %q), c.IsProxyTrusted %v", i, cfg, peer, skipped, key, fiberTrusts)
			}
		}
	}
}

// Limits keep the route template under group prefixes, and count one bucket per client
// where the route is not known yet: under group.Use, for every route beneath it and for
// paths that match none.
func TestRouteTemplates(t *testing.T) {
	var scopes []string
	observe := core.WithObserver(func(e core.Event) { scopes = append(scopes, e.Scope) })
	limit := func() fiber.Handler {
		return fiberlimit.Limit(100, time.Minute, core.WithStore(core.NewMemoryStore(nil)), observe)
	}
	app := fiber.New()
	api := app.Group("/api")
	api.Use(limit())
	api.Get("/user/:id", limit(), ok)
	api.Get("/item/:id", ok)
	send := serve(app)
	for _, c := range []struct {
		path   string
		status int
		scopes []string
	}{
		{"/api/user/1", 200, []string{"", "/api/user/:id"}},
		{"/api/user/2", 200, []string{"", "/api/user/:id"}},
		{"/api/item/3", 200, []string{""}},
		{"/api/nowhere/4", 404, []string{""}},
	} {
		scopes = nil
		if r := send(adaptertest.Request{Path: c.path}); r.Status != c.status {
			t.Errorf("%s: status %d, want %d", c.path, r.Status, c.status)
		}
		if fmt.Sprint(scopes) != fmt.Sprint(c.scopes) {
			t.Errorf("%s: limits saw routes %q, want %q", c.path, scopes, c.scopes)
		}
	}
}

// customCtx is an application's own context, which the adapter boxes as it is.
type customCtx struct {
	fiber.DefaultCtx
}

func TestCustomContext(t *testing.T) {
	app := fiber.NewWithCustomCtx(func(app *fiber.App) fiber.CustomCtx {
		return &customCtx{DefaultCtx: *fiber.NewDefaultCtx(app)}
	})
	var saw []string
	key := func(r core.Request) (string, error) {
		saw = append(saw, r.Method()+" "+r.Route()+" "+r.Path())
		return r.Header("X-API-Token"), nil
	}
	app.Get("/user/:id", fiberlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(key)), ok)
	send := serve(app)
	for i, c := range []struct {
		token  string
		status int
	}{{"a", 200}, {"a", 429}, {"b", 200}} {
		r := send(adaptertest.Request{Path: fmt.Sprintf("/user/%d", i), Header: adaptertest.H("X-API-Token", c.token)})
		if r.Status != c.status {
			t.Errorf("request %d with token %q: status %d, want %d", i, c.token, r.Status, c.status)
		}
	}
	if want := "[GET /user/:id /user/0 GET /user/:id /user/1 GET /user/:id /user/2]"; fmt.Sprint(saw) != want {
		t.Errorf("the key function saw %q, want %q", saw, want)
	}
}

// TestHeaderNamesNormalized backs the adapter's shortcut past fasthttp's normalizing: core's
// field names must already be in the form fasthttp would give them.
func TestHeaderNamesNormalized(t *testing.T) {
	for _, name := range []string{hook.HeaderRateLimitPolicy, hook.HeaderRateLimit, hook.HeaderRetryAfter,
		hook.HeaderLimit, hook.HeaderRemaining, hook.HeaderReset} {
		if got := string(fasthttp.AppendNormalizedHeaderKey(nil, name)); got != name {
			t.Errorf("%q normalizes to %q", name, got)
		}
	}
}

// TestFieldsWithNormalizingOff: with DisableHeaderNormalizing the fields keep core's names,
// a limit after another finds the fields it set and adds its members, and a handler
// setting one of them again replaces it rather than adding a second copy.
func TestFieldsWithNormalizingOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		app := fiber.New(fiber.Config{DisableHeaderNormalizing: off})
		app.Use(fiberlimit.Limit(10, time.Minute))
		app.Get("/x", fiberlimit.Limit(5, time.Minute, core.WithHeaders(core.HeadersBoth)), func(c fiber.Ctx) error {
			c.Set(hook.HeaderLimit, "overridden")
			return c.SendString("ok")
		})
		resp, err := app.Test(httptest.NewRequest("GET", "/x", nil), noTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Values(hook.HeaderLimit); len(got) != 1 || got[0] != "overridden" {
			t.Errorf("normalizing off=%v: %s = %q, want one value, the handler's", off, hook.HeaderLimit, got)
		}
		if got := strings.Join(resp.Header.Values(hook.HeaderRateLimitPolicy), ", "); got != `"10/1m";q=10;w=60, "5/1m";q=5;w=60` {
			t.Errorf("normalizing off=%v: %s = %q", off, hook.HeaderRateLimitPolicy, got)
		}
	}
}

// noTimeout makes app.Test wait for the handler: its default gives up after a second,
// which a loaded machine can take.
var noTimeout = fiber.TestConfig{Timeout: 0}

type traceKey struct{}

// failingStore fails every decision, so that the error hook is told.
type failingStore struct{}

func (failingStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, fmt.Errorf("store down")
}

// TestErrorHookSeesRequestContext: the adapter leaves reading the request's context to
// core, which must still hand the error hook the context the app set (c.SetContext), for
// a key function's error and a store's, with Fiber's context and a custom one.
func TestErrorHookSeesRequestContext(t *testing.T) {
	for _, custom := range []bool{false, true} {
		app := fiber.New()
		if custom {
			app = fiber.NewWithCustomCtx(func(app *fiber.App) fiber.CustomCtx {
				return &customCtx{DefaultCtx: *fiber.NewDefaultCtx(app)}
			})
		}
		app.Use(func(c fiber.Ctx) error {
			c.SetContext(context.WithValue(c.Context(), traceKey{}, strings.Clone(c.Get("X-Trace"))))
			return c.Next()
		})
		var mu sync.Mutex
		var saw []any
		hook := core.WithErrorHook(func(ctx context.Context, err error) {
			mu.Lock()
			saw = append(saw, ctx.Value(traceKey{}))
			mu.Unlock()
		})
		badKey := core.WithKey(func(core.Request) (string, error) { return "", fmt.Errorf("no token") })
		app.Get("/key", fiberlimit.Limit(5, time.Minute, core.WithStore(core.NewMemoryStore(nil)), badKey, hook), ok)
		app.Get("/store", fiberlimit.Limit(5, time.Minute, core.WithStore(failingStore{}), hook), ok)
		send := serve(app)
		for _, path := range []string{"/key", "/store"} {
			if r := send(adaptertest.Request{Path: path, Header: adaptertest.H("X-Trace", "t"+path)}); r.Status != 200 {
				t.Errorf("custom=%v %s: status %d", custom, path, r.Status)
			}
		}
		if want := "[t/key t/store]"; fmt.Sprint(saw) != want {
			t.Errorf("custom=%v: the error hook saw trace values %v, want %s", custom, saw, want)
		}
	}
}

// TestCustomContextWarnsOfAnUntrustedProxy: with an application's own context, which the
// adapter does not box for a limit that reads no more than header fields, a forwarded
// header from a loopback peer nobody trusted still gets its one warning.
func TestCustomContextWarnsOfAnUntrustedProxy(t *testing.T) {
	app := fiber.NewWithCustomCtx(func(app *fiber.App) fiber.CustomCtx {
		return &customCtx{DefaultCtx: *fiber.NewDefaultCtx(app)}
	})
	var warned []string
	hook := core.WithErrorHook(func(_ context.Context, err error) { warned = append(warned, err.Error()) })
	app.Get("/user/:id", fiberlimit.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), hook), ok)
	send := serve(app)
	for i, want := range []int{200, 200, 429} {
		r := send(adaptertest.Request{Path: "/user/1", Remote: "127.0.0.1:5000", Header: adaptertest.H("X-Forwarded-For", fmt.Sprint("198.51.100.", i+1))})
		if r.Status != want {
			t.Errorf("request %d: status %d, want %d", i+1, r.Status, want)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `core.WithTrustedProxies("127.0.0.1")`) || !strings.Contains(warned[0], `"/user/:id"`) {
		t.Errorf("warnings %q, want one naming core.WithTrustedProxies(\"127.0.0.1\") and the route", warned)
	}
}
