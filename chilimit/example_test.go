package chilimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/reqlimit/reqlimit/chilimit"
	"github.com/reqlimit/reqlimit/core"
)

// A limit on the whole router, per client and route.
func ExampleLimit() {
	r := chi.NewRouter()
	r.Use(chilimit.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil))))
	r.Get("/a", func(http.ResponseWriter, *http.Request) {})
	r.Get("/b", func(http.ResponseWriter, *http.Request) {})

	for _, path := range []string{"/a", "/a", "/a", "/b"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /a 200
	// /a 200
	// /a 429
	// /b 200
}
