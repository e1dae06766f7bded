// Command fiber3 is a Fiber v3 application with reqlimit's limits: GET /user/test 3 a
// minute, GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per
// X-API-Token (100 on the pro plan), and POST /login 5 failed attempts per 15 minutes.
//
//	go run ./examples/fiber3 -addr 127.0.0.1:8080
package main

import (
	"crypto/subtle"
	"flag"
	"log"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/recover"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
)

func newApp() *fiber.App {
	// Not behind a proxy: no TrustProxy, so fiberlimit uses the connection's peer. Behind
	// one, set TrustProxy, TrustProxyConfig.Proxies and ProxyHeader (X-Forwarded-For or
	// X-Real-IP), or use core.WithTrustedProxies; see the fiberlimit/v3 package doc.
	app := fiber.New(fiber.Config{
		// A bound on each stage of a connection: a client that sends its request slowly,
		// or idles on a kept-alive connection, would otherwise hold it as long as it
		// likes, and a limit only sees a request once it is read.
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	})
	// fasthttp does not recover a handler's panic: without this, one would end the process.
	app.Use(recover.New())
	hello := func(c fiber.Ctx) error { return c.SendString("hello\n") }
	// Limits go on each route: under app.Use, which runs before routing, Fiber cannot
	// tell routes apart.
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute), hello)
	app.Get("/search", fiberlimit.Limit(5, time.Second, core.WithRate(20, time.Minute)), hello)
	// Each API token issued has its own quota, by its plan; other requests are counted per IP.
	app.Get("/api/data", fiberlimit.Limit(10, time.Minute, core.WithKey(token), core.WithTiers(plan, plans), fiberlimit.WithDenyHandler(tooMany)), hello)
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	app.Post("/login", fiberlimit.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed)), login)
	return app
}

// tooMany refuses an API request in JSON, as API clients expect. The limit has already set
// Retry-After and the RateLimit fields; the body repeats the wait for clients that read
// only the body.
func tooMany(c fiber.Ctx, d core.Decision) error {
	retry, _ := strconv.Atoi(c.GetRespHeader("Retry-After"))
	return c.Status(fiber.StatusTooManyRequests).JSON(fiber.Map{"error": "too many requests", "retry_after": retry})
}

// password is the demo's; a real application checks a stored hash.
const password = "open sesame"

// login returns its failure as an error: the limit counts the 401 Fiber answers with.
func login(c fiber.Ctx) error {
	if subtle.ConstantTimeCompare([]byte(c.FormValue("password")), []byte(password)) != 1 {
		return fiber.NewError(fiber.StatusUnauthorized, "wrong password")
	}
	return c.SendString("welcome\n")
}

// issued stands for the application's store of the API tokens it issued, and their plans.
var issued = map[string]string{"alice": "free", "pro-7f3a9c": "pro", "internal-2b81e4": "internal"}

// token keys a request by its API token if the application issued it, any other request
// by the client's IP: keyed by whatever it sends, a client would make up a token for a
// fresh quota whenever its own ran out.
func token(r core.Request) (string, error) {
	if t := r.Header("X-API-Token"); issued[t] != "" {
		return t, nil
	}
	return "", nil
}

// plan names the plan of a request's token: pro tokens get 100 a minute, internal ones
// are unlimited, others the limit's own 10 a minute. It is looked up, never read from the
// token's text, which the client chooses.
func plan(r core.Request) string { return issued[r.Header("X-API-Token")] }

// plans are the policies of the plans other than the free one.
var plans = map[string]string{"pro": "100/1m", "internal": "unlimited"}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	log.Printf("listening on http://%s", *addr)
	log.Fatal(newApp().Listen(*addr, fiber.ListenConfig{DisableStartupMessage: true}))
}
