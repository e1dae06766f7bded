// Command gin is a Gin application with reqlimit's limits: GET /user/test 3 a minute,
// GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per X-API-Token (100 on the pro plan), and
// POST /login 5 failed attempts per 15 minutes.
//
//	go run ./examples/gin -addr 127.0.0.1:8080
package main

import (
	"crypto/subtle"
	"flag"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
)

func newRouter() *gin.Engine {
	gin.SetMode(gin.ReleaseMode) // debug mode's logging is for development
	r := gin.New()
	r.Use(gin.Recovery())
	// Not behind a proxy: trust none, so that c.ClientIP() cannot be forged either.
	// (ginlimit keys by the peer whatever this says, unless WithClientIPFromFramework.)
	if err := r.SetTrustedProxies(nil); err != nil {
		panic(err)
	}
	hello := func(c *gin.Context) { c.String(http.StatusOK, "hello\n") }
	r.GET("/user/test", ginlimit.Limit(3, time.Minute), hello)
	r.GET("/search", ginlimit.Limit(5, time.Second, core.WithRate(20, time.Minute)), hello)
	// Each API token issued has its own quota, by its plan; other requests are counted per IP.
	r.GET("/api/data", ginlimit.Limit(10, time.Minute, core.WithKey(token), core.WithTiers(plan, plans), ginlimit.WithDenyHandler(tooMany)), hello)
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	r.POST("/login", ginlimit.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed)), login)
	return r
}

// tooMany refuses an API request in JSON, as API clients expect. The limit has already set
// Retry-After and the RateLimit fields; the body repeats the wait for clients that read
// only the body.
func tooMany(c *gin.Context, d core.Decision) {
	retry, _ := strconv.Atoi(c.Writer.Header().Get("Retry-After"))
	c.JSON(http.StatusTooManyRequests, gin.H{"error": "too many requests", "retry_after": retry})
}

// password is the demo's; a real application checks a stored hash.
const password = "open sesame"

func login(c *gin.Context) {
	if subtle.ConstantTimeCompare([]byte(c.PostForm("password")), []byte(password)) != 1 {
		c.String(http.StatusUnauthorized, "wrong password\n")
		return
	}
	c.String(http.StatusOK, "welcome\n")
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
	srv := newServer(*addr, newRouter())
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
