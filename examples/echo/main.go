// Command echo is an Echo application with reqlimit's limits: GET /user/test 3 a minute,
// GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per X-API-Token (100 on the pro plan), and
// POST /login 5 failed attempts per 15 minutes.
//
//	go run ./examples/echo -addr 127.0.0.1:8080
package main

import (
	"crypto/subtle"
	"flag"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
)

func newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	// Not behind a proxy: take the client IP from the connection. Behind one, use
	// echo.ExtractIPFromXFFHeader(echo.TrustIPRange(...)); echolimit then follows it.
	e.IPExtractor = echo.ExtractIPDirect()
	hello := func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") }
	e.GET("/user/test", hello, echolimit.Limit(3, time.Minute))
	e.GET("/search", hello, echolimit.Limit(5, time.Second, core.WithRate(20, time.Minute)))
	// Each API token issued has its own quota, by its plan; other requests are counted per IP.
	e.GET("/api/data", hello, echolimit.Limit(10, time.Minute, core.WithKey(token), core.WithTiers(plan, plans), echolimit.WithDenyHandler(tooMany)))
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	e.POST("/login", login, echolimit.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed)))
	return e
}

// tooMany refuses an API request in JSON, as API clients expect. The limit has already set
// Retry-After and the RateLimit fields; the body repeats the wait for clients that read
// only the body.
func tooMany(c echo.Context, d core.Decision) error {
	retry, _ := strconv.Atoi(c.Response().Header().Get("Retry-After"))
	return c.JSON(http.StatusTooManyRequests, map[string]any{"error": "too many requests", "retry_after": retry})
}

// password is the demo's; a real application checks a stored hash.
const password = "open sesame"

// login returns its failure as an error: the limit counts the 401 Echo answers with.
func login(c echo.Context) error {
	if subtle.ConstantTimeCompare([]byte(c.FormValue("password")), []byte(password)) != 1 {
		return echo.NewHTTPError(http.StatusUnauthorized, "wrong password")
	}
	return c.String(http.StatusOK, "welcome\n")
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
	srv := newServer(*addr, newEcho())
	log.Printf("listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}

// newServer serves h on addr with a bound on each stage of a connection: a client that
// sends its request slowly, or idles on a kept-alive connection, would otherwise hold it
// as long as it likes, and a limit only sees a request once it is read.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
}
