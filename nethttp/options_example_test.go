package nethttp_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// send makes one request from remote with header name, value pairs, and returns the status.
func send(h http.Handler, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/search", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Two windows on one route: a request needs room in both, and is recorded in both.
// RateLimit-Policy lists both; RateLimit reports the tightest.
func Example_twoWindows() {
	h := nethttp.Limit(2, time.Second, core.WithRate(3, time.Minute), fresh())(hello)
	for range 3 {
		w := send(h, "192.0.2.1:1234")
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	fmt.Println(send(h, "192.0.2.1:1234").Header().Get("RateLimit-Policy"))
	// Output:
	// 200 "2/1s";r=1;t=1
	// 200 "2/1s";r=0;t=1
	// 429 "2/1s";r=0;t=1
	// "2/1s";q=2;w=1, "3/1m";q=3;w=60
}

// Keyed by an API token: each token has its own quota, whatever address it comes from;
// requests without one are counted per IP.
func Example_apiToken() {
	h := nethttp.Limit(1, time.Minute, core.WithKey(core.KeyByHeader("X-API-Token")), fresh())(hello)
	fmt.Println(send(h, "192.0.2.1:1", "X-API-Token", "alice").Code)
	fmt.Println(send(h, "198.51.100.9:1", "X-API-Token", "alice").Code) // same token, other address
	fmt.Println(send(h, "192.0.2.1:1", "X-API-Token", "bob").Code)
	fmt.Println(send(h, "192.0.2.1:1").Code) // no token: this IP's own quota
	// Output:
	// 200
	// 429
	// 200
	// 200
}

// Behind a proxy: X-Forwarded-For counts only on connections from it, walked from the
// right, so a client cannot forge its way to a fresh bucket.
func Example_trustedProxies() {
	h := nethttp.Limit(1, time.Minute, core.WithTrustedProxies("10.0.0.0/8"), fresh())(hello)
	fmt.Println(send(h, "10.0.0.5:1", "X-Forwarded-For", "203.0.113.7").Code)
	// The same client prepends a forged address: the proxy's entry is still the rightmost.
	fmt.Println(send(h, "10.0.0.5:1", "X-Forwarded-For", "6.6.6.6, 203.0.113.7").Code)
	// A client connecting directly cannot use the header at all.
	fmt.Println(send(h, "203.0.113.8:1", "X-Forwarded-For", "6.6.6.7").Code)
	fmt.Println(send(h, "203.0.113.8:1", "X-Forwarded-For", "6.6.6.8").Code)
	// Output:
	// 200
	// 429
	// 200
	// 429
}

// A limit read from configuration: a bad policy is an error naming the bad part, not a panic.
func ExampleNew() {
	if _, err := nethttp.New("500/2s,2000/ten seconds"); err != nil {
		// The error goes on to say where the limit was registered: file, line and code.
		msg, _, _ := strings.Cut(err.Error(), " (limit registered at")
		fmt.Println(msg)
	}
	limit, err := nethttp.New("500/2s,2000/10s", fresh())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(send(limit(hello), "192.0.2.1:1").Header().Get("RateLimit-Policy"))
	// Output:
	// policy "500/2s,2000/ten seconds": at offset 7, "2000/ten seconds": bad period "ten seconds": want a duration such as 1m, 2s, 500ms or 1d: reqlimit: bad policy
	// "500/2s";q=500;w=2, "2000/10s";q=2000;w=10
}

// An observer sees every decision: count outcomes per route for a dashboard. Dry run
// decides and reports but never refuses: try a limit on live traffic first.
func Example_observer() {
	counts := map[string]int{}
	observe := core.WithObserver(func(e core.Event) { counts[e.Scope+" "+e.Outcome.String()]++ })
	mux := http.NewServeMux()
	mux.Handle("GET /search", nethttp.Limit(2, time.Minute, observe, core.WithDryRun(), fresh())(hello))
	for range 5 {
		send(mux, "192.0.2.1:1")
	}
	fmt.Println(counts["GET /search admitted"], "admitted,", counts["GET /search refused"], "over the limit but let through")
	// Output:
	// 2 admitted, 3 over the limit but let through
}
