package echolimit_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit/v5"
)

// With RouterConfig.AutoHandleHEAD, a HEAD request runs the GET route's middleware behind
// Echo's HEAD writer, which commits the response without keeping its status: the limit
// read 200 for the 401 the client got, so under core.Failed HEAD requests tried
// credentials without limit.
func TestAutoHeadStatusSeen(t *testing.T) {
	e := echo.NewWithConfig(echo.Config{Router: echo.NewRouter(echo.RouterConfig{AutoHandleHEAD: true})})
	e.GET("/private", func(c *echo.Context) error { return c.String(401, "bad credentials") },
		echolimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)))
	if got, want := statuses(e, "HEAD", "/private", 5), "[401 401 401 429 429]"; got != want {
		t.Errorf("5 HEAD requests answered 401, limit 3/1m counting failures: %v, want %s", got, want)
	}
}

// statuses sends n requests to e and returns their statuses, as "[401 429 ...]".
func statuses(e *echo.Echo, method, path string, n int) string {
	var got []int
	for range n {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		got = append(got, w.Code)
	}
	return fmt.Sprint(got)
}
