package echolimit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// Echo v4's default, no IPExtractor: c.RealIP() believes X-Forwarded-For and X-Real-IP
// from any client, so WithClientIPFromFramework must not follow it there, wherever the
// limit is mounted; the peer's address is the key.
func TestNoExtractorIsNotTrusted(t *testing.T) {
	limit := func() echo.MiddlewareFunc {
		return echolimit.Limit(3, time.Minute, fresh(), core.WithClientIPFromFramework())
	}
	for name, build := range map[string]func() *echo.Echo{
		"route": func() *echo.Echo {
			e := echo.New()
			e.GET(adaptertest.RecipePath, echoOK, limit())
			return e
		},
		"use": func() *echo.Echo {
			e := echo.New()
			e.Use(limit())
			e.GET(adaptertest.RecipePath, echoOK)
			return e
		},
		"pre": func() *echo.Echo {
			e := echo.New()
			e.Pre(limit())
			e.GET(adaptertest.RecipePath, echoOK)
			return e
		},
	} {
		t.Run(name, func(t *testing.T) { adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(build())) })
	}
}

// The limit that does not follow c.RealIP() says so, once, naming the fix; one whose Echo
// has an extractor follows it without a word.
func TestNoExtractorWarnsOnce(t *testing.T) {
	for _, extractor := range []echo.IPExtractor{nil, echo.ExtractIPDirect()} {
		var seen []string
		e := echo.New()
		e.IPExtractor = extractor
		e.GET(adaptertest.RecipePath, echoOK, echolimit.Limit(3, time.Minute, fresh(), core.WithClientIPFromFramework(),
			core.WithErrorHook(func(_ context.Context, err error) { seen = append(seen, err.Error()) })))
		adaptertest.ExpectForgeriesIgnored(t, adaptertest.ServeHTTP(e))
		switch {
		case extractor == nil && (len(seen) != 1 || !strings.Contains(seen[0], "IPExtractor") || !strings.Contains(seen[0], adaptertest.RecipePath)):
			t.Errorf("no extractor: warnings %q; want one, naming IPExtractor and the route", seen)
		case extractor != nil && len(seen) != 0:
			t.Errorf("ExtractIPDirect: warnings %q; want none", seen)
		}
	}
}
