package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
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

// unwrapOnly is an outer middleware's writer in the Go 1.20 style: Unwrap, no Hijack.
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Behind a writer that only unwraps, a handler's hijack goes through the chain
// (http.ResponseController, as Echo's Response.Hijack does) and must still be seen: the
// connection counts. It was settled as 200 and given back.
func TestHijackThroughAnUnwrappingWriterCounts(t *testing.T) {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Writer = unwrapOnly{c.Response().Writer}
			return next(c)
		}
	})
	e.GET("/ws", func(c echo.Context) error { adaptertest.Hijack(c.Response()); return nil },
		echolimit.Limit(1, time.Minute, fresh(), core.WithCountWhen(core.Failed)))
	adaptertest.CheckHijackCounts(t, e)
}
