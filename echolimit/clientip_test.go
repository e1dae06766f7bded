package echolimit_test

import (
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
