package nethttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/nethttp"
)

func Example() {
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, fresh())(ok))

	for i := 1; i <= 4; i++ {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", fmt.Sprintf("/user/%d", i), nil))
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "3/1m";r=2;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "3/1m";r=0;t=60 Retry-After: "60"
}

// fresh gives each example a store of its own, so that it starts empty every time it runs,
// on a clock that stands still, so that the waits it prints (t=60) do not shrink on a
// machine that stalls between requests; applications normally share the process-wide
// default store, on the real clock.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}
