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
	"strings"
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
	// Each API token has its own quota, by its plan; requests without one are counted per IP.
	e.GET("/api/data", hello, echolimit.Limit(10, time.Minute, core.WithKey(core.KeyByHeader("X-API-Token")), core.WithTiers(plan, plans)))
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	e.POST("/login", login, echolimit.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed)))
	return e
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
	srv := &http.Server{Addr: *addr, Handler: newEcho(), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}
