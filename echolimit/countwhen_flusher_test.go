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

// A limit counting by outcome keeps c.Response().Writer an http.Flusher when it was one: a
// streaming handler that checks, as many do, failed behind the limit.
func TestCountWhenKeepsFlusher(t *testing.T) {
	sse := func(c echo.Context) error {
		if _, ok := c.Response().Writer.(http.Flusher); !ok {
			return echo.NewHTTPError(500, "streaming unsupported")
		}
		return c.String(200, "data: x\n\n")
	}
	for _, opts := range [][]core.Option{nil, {core.WithCountWhen(core.Failed)}} {
		e := echo.New()
		e.GET("/events", sse, echolimit.Limit(5, time.Minute, append(opts, core.WithStore(core.NewMemoryStore(nil)))...))
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/events", nil))
		if w.Code != 200 {
			t.Errorf("with %d options: status %d: %s", len(opts), w.Code, w.Body)
		}
	}
}
