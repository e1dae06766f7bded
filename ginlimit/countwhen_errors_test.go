package ginlimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// A handler that leaves an error for an error-rendering middleware mounted before the
// limit writes nothing before the limit settles: its status is not known, so it counts.
// The limit read Gin's default 200 and gave the slot back, so failed logins answered 401
// by that middleware were never counted.
func TestErrorLeftForAnOuterMiddlewareCounts(t *testing.T) {
	gin.SetMode(gin.TestMode)
	errUnauthorized := errors.New("bad password")
	r := gin.New()
	r.Use(func(c *gin.Context) { // renders handler errors, as many Gin apps do
		c.Next()
		if len(c.Errors) > 0 && !c.Writer.Written() {
			c.JSON(http.StatusUnauthorized, gin.H{"error": c.Errors.Last().Error()})
		}
	})
	r.POST("/login", ginlimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed)),
		func(c *gin.Context) { c.Error(errUnauthorized) })
	var codes []int
	for range 6 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
		codes = append(codes, w.Code)
	}
	want := []int{401, 401, 401, 429, 429, 429}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("6 failed logins at 3/1m counting failures: statuses %v, want %v", codes, want)
		}
	}
}
