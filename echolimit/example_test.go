package echolimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/echolimit"
)

func Example() {
	e := echo.New()
	e.GET("/user/:id", func(c echo.Context) error { return c.String(200, "ok") }, echolimit.Limit(3, time.Minute, fresh()))

	for i := 1; i <= 4; i++ {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/user/%d", i), nil))
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "3/1m";r=2;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "3/1m";r=0;t=60 Retry-After: "60"
}

func ExampleWithDenyHandler() {
	e := echo.New()
	// Returning an *echo.HTTPError hands the refusal to the app's HTTPErrorHandler.
	limit := echolimit.Limit(1, time.Minute, fresh(), echolimit.WithDenyHandler(func(c echo.Context, d core.Decision) error {
		return echo.NewHTTPError(http.StatusTooManyRequests, "rate limited")
	}))
	e.GET("/search", func(c echo.Context) error { return c.String(200, "ok") }, limit)

	for range 2 {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
		fmt.Println(w.Code, w.Body.String())
	}
	// Output:
	// 200 ok
	// 429 {"message":"rate limited"}
}

// fresh gives each example a store of its own, so that it starts empty every time it runs,
// on a clock that stands still, so that the waits it prints (t=60) do not shrink on a
// machine that stalls between requests; applications normally share the process-wide
// default store, on the real clock.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}
