package ginlimit_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// Gin sets 405 before the app-wide handlers run on a path whose route takes other methods
// (HandleMethodNotAllowed): a deny function that writes nothing there still leaves the
// default refusal, not the 405 Gin held.
func TestDenyWritingNothingOnMethodNotAllowedRefuses(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(ginlimit.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		ginlimit.WithDenyHandler(func(c *gin.Context, _ core.Decision) { c.Header("X-Denied", "1") })))
	r.GET("/a", func(c *gin.Context) { c.String(200, "ok") })
	for i, want := range []int{405, 429} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/a", nil))
		if w.Code != want {
			t.Fatalf("request %d: status %d %q, want %d", i+1, w.Code, w.Body, want)
		}
	}
}
