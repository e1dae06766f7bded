package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
)

// A deny function that answers through the http.ResponseWriter Echo wraps (a net/http
// helper given c.Response().Writer), which Echo does not see as committed, has answered:
// the default refusal must not follow it into the same response.
func TestDenyWritingToTheWriterIsTheAnswer(t *testing.T) {
	deny := echolimit.WithDenyHandler(func(c echo.Context, _ core.Decision) error {
		http.Error(c.Response().Writer, "slow down", http.StatusServiceUnavailable)
		return nil
	})
	e := echo.New()
	e.GET("/a", func(c echo.Context) error { return c.String(200, "ok") },
		echolimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), deny))
	for i, want := range []struct {
		status int
		body   string
	}{{200, "ok"}, {503, "slow down\n"}} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/a", nil))
		if w.Code != want.status || w.Body.String() != want.body {
			t.Errorf("request %d: %d %q, want %d %q", i+1, w.Code, w.Body, want.status, want.body)
		}
	}
}
