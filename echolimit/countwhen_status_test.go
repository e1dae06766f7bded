package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
)

// serveStatuses sends n requests from one client to e and returns the statuses the client got.
func serveStatuses(e *echo.Echo, method, path string, n int) []int {
	var got []int
	for i := 0; i < n; i++ {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "192.0.2.7:4321"
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		got = append(got, rec.Code)
	}
	return got
}

// A handler that answers through the net/http writer Echo hands it (c.Response().Writer,
// as http.Error, http.ServeContent or any net/http helper is given) sends 401 without
// Echo's Response seeing it committed: the limit counts the status written, so under
// core.Failed (login protection) the failed attempt keeps its slot.
func TestCountWhenSeesStatusWrittenToTheResponseWriter(t *testing.T) {
	e := echo.New()
	e.POST("/login", func(c echo.Context) error {
		http.Error(c.Response().Writer, "bad password", http.StatusUnauthorized)
		return nil
	}, echolimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)))
	got := serveStatuses(e, http.MethodPost, "/login", 3)
	if want := []int{401, 429, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v: the 401s written through c.Response().Writer were given back", got, want)
	}
}

// A streaming handler that flushes (sending 200 and its headers) and then returns an error
// has answered 200: Echo's error handler cannot change a status already sent. Under
// core.Succeeded what was served counts.
func TestCountWhenFlushThenErrorCountsTheStatusSent(t *testing.T) {
	e := echo.New()
	e.GET("/stream", func(c echo.Context) error {
		c.Response().Header().Set("Content-Type", "text/event-stream")
		c.Response().Flush()
		return echo.NewHTTPError(http.StatusServiceUnavailable, "upstream gone")
	}, echolimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Succeeded)))
	got := serveStatuses(e, http.MethodGet, "/stream", 3)
	if want := []int{200, 429, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v: a response sent as 200 was settled as 503 and given back", got, want)
	}
}
