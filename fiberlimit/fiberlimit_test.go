package fiberlimit_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
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

func TestKeptStringsAreCopies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   fiber.Config
		opts  []core.Option
		req   func(i int) adaptertest.Request
		scope string
		key   func(i int) string
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
			cfg:  fiber.Config{EnableTrustedProxyCheck: true, TrustedProxies: []string{"192.0.2.0/24"}, ProxyHeader: "X-Real-IP"},
			req: func(i int) adaptertest.Request {
				return adaptertest.Request{Path: fmt.Sprintf("/k/%d", i), Header: adaptertest.H("X-Real-IP", fmt.Sprintf("203.0.113.%d", i))}
			},
			key: func(i int) string { return fmt.Sprintf("203.0.113.%d", i) },
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
			app.Get("/k/:id", fiberlimit.Limit(1000, time.Minute, opts...), func(c *fiber.Ctx) error { return c.SendString("ok") })
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

// Found in review: with ProxyHeader X-Forwarded-For, Fiber's c.IP() is the chain's leftmost
// entry, which the client writes. A client forging a new leftmost entry on every request
// must not get a new bucket, whatever EnableIPValidation says, and even with the opt-in.
func TestForgedLeftmostForwardedForIgnored(t *testing.T) {
	for _, validate := range []bool{false, true} {
		for _, optIn := range []bool{false, true} {
			app := fiber.New(fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor, EnableTrustedProxyCheck: true,
				TrustedProxies: []string{"0.0.0.0/0"}, EnableIPValidation: validate})
			opts := []core.Option{core.WithStore(core.NewMemoryStore(nil))}
			if optIn {
				opts = append(opts, core.WithClientIPFromFramework())
			}
			app.Get("/a", fiberlimit.Limit(1, time.Minute, opts...), func(c *fiber.Ctx) error { return c.SendString("ok") })
			admitted := 0
			for i := range 20 {
				req := httptest.NewRequest("GET", "/a", nil)
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("6.6.%d.%d, 198.51.100.7", i/256, i%256))
				resp, err := app.Test(req, noTimeout)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode == 200 {
					admitted++
				}
			}
			if admitted != 1 {
				t.Fatalf("EnableIPValidation=%v, opt-in %v: %d of 20 admitted under 1 per minute", validate, optIn, admitted)
			}
		}
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
// and a handler setting one of them again replaces it rather than adding a second copy.
func TestFieldsWithNormalizingOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		app := fiber.New(fiber.Config{DisableHeaderNormalizing: off})
		app.Get("/x", fiberlimit.Limit(5, time.Minute, core.WithHeaders(core.HeadersBoth)), func(c *fiber.Ctx) error {
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
		if got := resp.Header.Get(hook.HeaderRateLimitPolicy); got != `"5/1m";q=5;w=60` {
			t.Errorf("normalizing off=%v: %s = %q", off, hook.HeaderRateLimitPolicy, got)
		}
	}
}

// noTimeout makes app.Test wait for the handler however long it takes: by default it
// gives up after a second, which a loaded machine can stall a request past.
const noTimeout = -1
