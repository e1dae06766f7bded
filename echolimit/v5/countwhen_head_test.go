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
	var got []int
	for range 5 {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("HEAD", "/private", nil))
		got = append(got, w.Code)
	}
	if want := "[401 401 401 429 429]"; fmt.Sprint(got) != want {
		t.Errorf("5 HEAD requests answered 401, limit 3/1m counting failures: %v, want %s", got, want)
	}
}
