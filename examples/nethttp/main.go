// Command nethttp is a net/http application with reqlimit's limits: GET /user/test 3 a
// minute, GET /search 5 a second and 20 a minute, GET /api/data 10 a minute per
// X-API-Token (100 on the pro plan), and POST /login 5 failed attempts per 15 minutes.
//
//	go run ./examples/nethttp -addr 127.0.0.1:8080
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute)(hello))
	mux.Handle("GET /search", nethttp.Limit(5, time.Second, core.WithRate(20, time.Minute))(hello))
	// Each API token issued has its own quota, by its plan; other requests are counted per IP.
	mux.Handle("GET /api/data", nethttp.Limit(10, time.Minute, core.WithKey(token), core.WithTiers(plan, plans), nethttp.WithDenyHandler(tooMany))(hello))
	// Login protection: only failed attempts (a 401) count. A client guessing passwords
	// gets 5 tries per 15 minutes; logging in uses none of them.
	mux.Handle("POST /login", nethttp.Limit(5, 15*time.Minute, core.WithCountWhen(core.Failed))(http.HandlerFunc(login)))
	return mux
}

// tooMany refuses an API request in JSON, as API clients expect. The limit has already set
// Retry-After and the RateLimit fields; the body repeats the wait for clients that read
// only the body.
func tooMany(w http.ResponseWriter, r *http.Request, d core.Decision) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":"too many requests","retry_after":%s}`+"\n", w.Header().Get("Retry-After"))
}

// password is the demo's; a real application checks a stored hash.
const password = "open sesame"

func login(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("password")), []byte(password)) != 1 {
		http.Error(w, "wrong password", http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "welcome\n")
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
	srv := newServer(*addr, newMux())
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
