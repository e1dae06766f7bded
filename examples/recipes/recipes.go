// Package recipes holds the code of docs/recipes.md, so that it compiles and its tests run
// it: every Go block of that page is text of this file.
package recipes

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	fiber2 "github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	echo4 "github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	echolimit5 "github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/fiberlimit"
	fiberlimit3 "github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/nethttp"
)

type planKey struct{}

// plan is the plan your authentication middleware stored in the request's context, never
// a header the client writes: with one, any client could name itself "internal".
func plan(r core.Request) string {
	p, _ := r.Value(planKey{}).(string)
	return p
}

// search allows 100 requests an hour on the free plan, 1,000 on the paid one, and any
// number to internal callers.
func search(h http.Handler) http.Handler {
	return nethttp.Limit(100, time.Hour, core.WithTiers(plan, map[string]string{
		"paid":     "1000/1h",
		"internal": "unlimited",
	}))(h)
}

type userKey struct{}

// failedLogins reaches the login limit's buckets outside requests.
var failedLogins = new(core.Quota)

// login allows 5 failed attempts per 15 minutes per user name, which a middleware before
// it stored in the request's context; a user who signs in is never slowed down.
func login(h http.Handler) http.Handler {
	return nethttp.Limit(5, 15*time.Minute,
		core.WithScope("login"),
		core.WithKey(core.KeyByValue(userKey{})),
		core.WithCountWhen(core.Failed),
		core.WithQuota(failedLogins))(h)
}

// passwordWasReset forgets the user's failed attempts.
func passwordWasReset(ctx context.Context, user string) error {
	return failedLogins.Reset(ctx, user)
}

// attemptsLeft tells how many attempts the user has left, spending none.
func attemptsLeft(ctx context.Context, user string) (int, error) {
	d, err := failedLogins.Peek(ctx, user)
	return d.Remaining, err
}

// refusal is the JSON body of a refused request.
func refusal(d core.Decision) map[string]any {
	return map[string]any{
		"error":               "too many requests",
		"retry_after_seconds": int(math.Ceil(d.RetryAfter.Seconds())),
	}
}

// jsonRefusal answers a refused request in JSON. Retry-After and the RateLimit fields are
// set before it runs.
func jsonRefusal(w http.ResponseWriter, r *http.Request, d core.Decision) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	json.NewEncoder(w).Encode(refusal(d))
}

// hello allows 3 requests a minute per client, and refuses the others in JSON.
func hello(h http.Handler) http.Handler {
	return nethttp.Limit(3, time.Minute, nethttp.WithDenyHandler(jsonRefusal))(h)
}

// The same refusal in each framework's idiom, for its adapter's WithDenyHandler.
var (
	ginJSON    = ginlimit.WithDenyHandler(func(c *gin.Context, d core.Decision) { c.JSON(429, refusal(d)) })
	echo4JSON  = echolimit.WithDenyHandler(func(c echo4.Context, d core.Decision) error { return c.JSON(429, refusal(d)) })
	echo5JSON  = echolimit5.WithDenyHandler(func(c *echo5.Context, d core.Decision) error { return c.JSON(429, refusal(d)) })
	fiber2JSON = fiberlimit.WithDenyHandler(func(c *fiber2.Ctx, d core.Decision) error { return c.Status(429).JSON(refusal(d)) })
	fiber3JSON = fiberlimit3.WithDenyHandler(func(c fiber3.Ctx, d core.Decision) error { return c.Status(429).JSON(refusal(d)) })
)
