package ginlimit_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/ginlimit"
)

func Example() {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.GET("/user/:id", ginlimit.Limit(3, time.Minute, fresh()), func(c *gin.Context) { c.String(200, "ok") })

	for i := 1; i <= 4; i++ {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/user/%d", i), nil))
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "3/1m";r=2;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "3/1m";r=0;t=60 Retry-After: "60"
}

func ExampleWithDenyHandler() {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	limit := ginlimit.Limit(1, time.Minute, fresh(), ginlimit.WithDenyHandler(func(c *gin.Context, d core.Decision) {
		c.JSON(429, gin.H{"error": "rate limited", "retry_in_seconds": d.RetryAfter.Round(time.Second).Seconds()})
	}))
	r.GET("/search", limit, func(c *gin.Context) { c.String(200, "ok") })

	for range 2 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
		fmt.Println(w.Code, w.Body.String())
	}
	// Output:
	// 200 ok
	// 429 {"error":"rate limited","retry_in_seconds":60}
}

// fresh gives each example a store of its own, so that it starts empty every time it runs,
// on a clock that stands still, so that the waits it prints (t=60) do not shrink on a
// machine that stalls between requests; applications normally share the process-wide
// default store, on the real clock.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}
