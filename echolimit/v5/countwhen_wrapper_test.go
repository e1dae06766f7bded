package echolimit_test

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
)

// plainWrapper is a response writer an application middleware puts in front of Echo's
// (a logger, a tracer) that does not implement Unwrap.
type plainWrapper struct{ http.ResponseWriter }

func wrapPlain(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		c.SetResponse(plainWrapper{c.Response()})
		return next(c)
	}
}

// Behind an application's writer without Unwrap, Echo cannot find its Response: the limit
// read 200 for every status a handler wrote, and never counted a failed login.
func TestWrappedWriterStatusSeen(t *testing.T) {
	e := echo.New()
	e.Use(wrapPlain)
	e.POST("/login", func(c *echo.Context) error { return c.String(401, "bad password") },
		echolimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)))
	if got, want := statuses(e, "POST", "/login", 5), "[401 401 401 429 429]"; got != want {
		t.Errorf("5 failed logins, limit 3/1m counting failures: %v, want %s", got, want)
	}
}

// Behind such a writer, a connection taken over still counts (it was settled as 200).
func TestWrappedWriterHijackCounts(t *testing.T) {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			c.SetResponse(hijackOnly{c.Response()})
			return next(c)
		}
	})
	e.GET("/ws", func(c *echo.Context) error { adaptertest.Hijack(c.Response()); return nil },
		echolimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)))
	adaptertest.CheckHijackCounts(t, e)
}

// hijackOnly passes Hijack on (through http.ResponseController) but has no Unwrap.
type hijackOnly struct{ w http.ResponseWriter }

func (h hijackOnly) Header() http.Header         { return h.w.Header() }
func (h hijackOnly) Write(b []byte) (int, error) { return h.w.Write(b) }
func (h hijackOnly) WriteHeader(code int)        { h.w.WriteHeader(code) }
func (h hijackOnly) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.w).Hijack()
}
