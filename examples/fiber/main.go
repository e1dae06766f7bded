// Command fiber is a Fiber application with reqlimit's limits: GET /user/test 3 a minute,
// GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per X-API-Token (100 on the pro plan), and
// POST /login 5 failed attempts per 15 minutes.
//
//	go run ./examples/fiber -addr 127.0.0.1:8080
package main

import (
	"crypto/subtle"
	"flag"
	"log"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit"
)

func newApp() *fiber.App {
	// Not behind a proxy: no ProxyHeader, so fiberlimit uses the connection's peer. Behind
	// one, see docs/operations.md: a single-address ProxyHeader (X-Real-IP) with
	// EnableTrustedProxyCheck and TrustedProxies, or core.WithTrustedProxies for
	// X-Forwarded-For.
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	hello := func(c *fiber.Ctx) error { return c.SendString("hello\n") }
	// Limits go on each route: under app.Use, Fiber cannot tell routes apart.
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), hello)
	app.Get("/search", fiberlimit.Limit(5, time.Second, core.WithRate(20, time.Minute)), hello)
	// Each API token has its own quota, by its plan; requests without one are counted per IP.
	app.Get("/api/data", fiberlimit.Limit(10, time.Minute, core.WithKey(core.KeyByHeader("X-API-Token")), core.WithTiers(plan, plans)), hello)
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	app.Post("/login", fiberlimit.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed)), login)
	return app
}

// password is the demo's; a real application checks a stored hash.
const password = "open sesame"

// login returns its failure as an error: the limit counts the 401 Fiber answers with.
func login(c *fiber.Ctx) error {
	if subtle.ConstantTimeCompare([]byte(c.FormValue("password")), []byte(password)) != 1 {
		return fiber.NewError(fiber.StatusUnauthorized, "wrong password")
	}
	return c.SendString("welcome\n")
}

// plan names the plan of a request's API token: tokens starting "pro-" are on the pro plan
// (100 a minute), "internal-" ones unlimited, others free (the limit's own 10 a minute).
// A real application looks the token up; a client cannot pick its plan by header alone.
func plan(r core.Request) string {
	token := r.Header("X-API-Token")
	switch {
	case strings.HasPrefix(token, "pro-"):
		return "pro"
	case strings.HasPrefix(token, "internal-"):
		return "internal"
	}
	return ""
}

// plans are the policies of the plans other than the free one.
var plans = map[string]string{"pro": "100/1m", "internal": "unlimited"}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	log.Printf("listening on http://%s", *addr)
	log.Fatal(newApp().Listen(*addr))
}
