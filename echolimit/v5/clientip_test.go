package echolimit_test

// Echo v5 reads the client IP through Echo#IPExtractor, and LegacyIPExtractor, v4's
// default kept for compatibility, believes any client's headers: "an extractor is set"
// does not mean "the IP is safe". These tests hold the adapter to the peer's address
// wherever the application's extractor would let a client choose its own.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	echolimit "github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// recipeLimit is the limit adaptertest's recipe checks expect on RecipePath.
func recipeLimit(opts ...core.Option) echo.MiddlewareFunc {
	return echolimit.Limit(3, time.Minute, append([]core.Option{fresh()}, opts...)...)
}

// Under LegacyIPExtractor, WithClientIPFromFramework must not hand the client the key,
// however the extractor was installed and wherever the limit is mounted.
func TestLegacyIPExtractorIsNotTrusted(t *testing.T) {
	fromFramework := core.WithClientIPFromFramework()
	cases := []struct {
		name  string
		build func(t *testing.T) *echo.Echo
	}{
		{"field", func(*testing.T) *echo.Echo {
			e := echo.New()
			e.IPExtractor = echo.LegacyIPExtractor()
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit(fromFramework))
			return e
		}},
		{"config", func(*testing.T) *echo.Echo {
			e := echo.NewWithConfig(echo.Config{IPExtractor: echo.LegacyIPExtractor()})
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit(fromFramework))
			return e
		}},
		{"use", func(*testing.T) *echo.Echo {
			e := echo.New()
			e.IPExtractor = echo.LegacyIPExtractor()
			e.Use(recipeLimit(fromFramework))
			e.GET(adaptertest.RecipePath, echoOK)
			return e
		}},
		{"pre", func(*testing.T) *echo.Echo {
			e := echo.New()
			e.IPExtractor = echo.LegacyIPExtractor()
			e.Pre(recipeLimit(fromFramework))
			e.GET(adaptertest.RecipePath, echoOK)
			return e
		}},
		{"without-the-option", func(*testing.T) *echo.Echo {
			e := echo.New()
			e.IPExtractor = echo.LegacyIPExtractor()
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit())
			return e
		}},
		{"with-core-trusted-proxies", func(*testing.T) *echo.Echo {
			// core's own walk of X-Forwarded-For still applies, to the peer: the
			// untrusted peers the check sends from are not proxies.
			e := echo.New()
			e.IPExtractor = echo.LegacyIPExtractor()
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit(fromFramework, core.WithTrustedProxies("10.0.0.0/8")))
			return e
		}},
		{"installed-after-the-first-request", func(t *testing.T) *echo.Echo {
			// An answer cached from the first request would still trust the extractor
			// that was replaced.
			e := echo.New()
			e.IPExtractor = echo.ExtractIPFromXFFHeader(echo5ProxyTrust()...)
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit(fromFramework))
			r := httptest.NewRequest("GET", adaptertest.RecipePath, nil)
			r.RemoteAddr = "10.0.0.2:5000"
			r.Header.Set("X-Forwarded-For", "203.0.113.50")
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("first request: status %d, want 200", w.Code)
			}
			e.IPExtractor = echo.LegacyIPExtractor()
			return e
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(c.build(t))) })
	}
}

// Echo's default, no IPExtractor: c.RealIP() is the peer since v5.1.0, and the option
// changes nothing.
func TestDefaultConfigIgnoresForgedHeaders(t *testing.T) {
	for name, opts := range map[string][]core.Option{"peer": nil, "from-framework": {core.WithClientIPFromFramework()}} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			e.GET(adaptertest.RecipePath, echoOK, recipeLimit(opts...))
			adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(e))
		})
	}
}

// Only LegacyIPExtractor is refused: an application's own extractor is its decision, and
// is followed.
func TestOwnExtractorIsFollowed(t *testing.T) {
	e := echo.New()
	e.IPExtractor = func(r *http.Request) string { return r.Header.Get("X-Client") }
	e.GET("/a", echoOK, echolimit.Limit(1, time.Minute, fresh(), core.WithClientIPFromFramework()))
	send := adaptertest.ServeHTTP(e)
	for i, c := range []struct {
		client string
		want   int
	}{{"203.0.113.1", 200}, {"203.0.113.1", 429}, {"203.0.113.2", 200}} {
		if got := send(adaptertest.Request{Path: "/a", Header: adaptertest.H("X-Client", c.client)}).Status; got != c.want {
			t.Errorf("request %d as %s: status %d, want %d", i+1, c.client, got, c.want)
		}
	}
}

// Core makes the key from the string the extractor returns: an IPv6 client's /64 is one
// client, and an IPv4-mapped address is its IPv4 one, through either of Echo's extractors.
func TestFrameworkIPGroupsAddresses(t *testing.T) {
	for _, c := range []struct {
		name      string
		extractor echo.IPExtractor
		header    string
	}{
		{"X-Forwarded-For", echo.ExtractIPFromXFFHeader(echo5ProxyTrust()...), "X-Forwarded-For"},
		{"X-Real-IP", echo.ExtractIPFromRealIPHeader(echo5ProxyTrust()...), "X-Real-IP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := echo.New()
			e.IPExtractor = c.extractor
			e.GET("/a", echoOK, echolimit.Limit(1, time.Minute, fresh(), core.WithClientIPFromFramework()))
			send := adaptertest.ServeHTTP(e)
			for i, st := range []struct {
				client string
				want   int
			}{
				{"2001:db8:1:2::1", 200}, {"2001:db8:1:2:ffff::9", 429}, {"[2001:db8:1:2::3]", 429},
				{"2001:db8:1:3::1", 200},
				{"::ffff:203.0.113.7", 200}, {"203.0.113.7", 429},
				{"203.0.113.8", 200}, {"[::ffff:203.0.113.8]", 429},
			} {
				got := send(adaptertest.Request{Path: "/a", Remote: "10.0.0.2:5000", Header: adaptertest.H(c.header, st.client)}).Status
				if got != st.want {
					t.Errorf("request %d, client %s behind a trusted proxy: status %d, want %d", i+1, st.client, got, st.want)
				}
			}
		})
	}
}

// The limit that does not follow LegacyIPExtractor says so, once, naming the fix; with no
// extractor (c.RealIP() is then the peer) or a safe one it says nothing.
func TestLegacyIPExtractorWarnsOnce(t *testing.T) {
	for name, extractor := range map[string]echo.IPExtractor{"legacy": echo.LegacyIPExtractor(), "none": nil, "direct": echo.ExtractIPDirect()} {
		var seen []string
		e := echo.New()
		e.IPExtractor = extractor
		e.GET(adaptertest.RecipePath, echoOK, recipeLimit(core.WithClientIPFromFramework(),
			core.WithErrorHook(func(_ context.Context, err error) { seen = append(seen, err.Error()) })))
		adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(e))
		switch {
		case name == "legacy" && (len(seen) != 1 || !strings.Contains(seen[0], "LegacyIPExtractor") || !strings.Contains(seen[0], adaptertest.RecipePath)):
			t.Errorf("legacy: warnings %q; want one, naming LegacyIPExtractor and the route", seen)
		case name != "legacy" && len(seen) != 0:
			t.Errorf("%s: warnings %q; want none", name, seen)
		}
	}
}
