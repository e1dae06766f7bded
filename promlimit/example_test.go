package promlimit_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/promlimit"
)

// A route limited to 3 a minute, with its decisions on /metrics.
func Example() {
	reg := prometheus.NewRegistry() // or promlimit.New(nil): prometheus.DefaultRegisterer
	m := promlimit.New(reg)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	// A store of its own, so that the example starts empty every run; an app leaves it out.
	store := core.WithStore(core.NewMemoryStore(nil))

	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, m.Option(), store)(hello))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 5 {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/user/1", nil))
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for s := bufio.NewScanner(w.Body); s.Scan(); {
		if strings.HasPrefix(s.Text(), "reqlimit_requests_total") {
			fmt.Println(s.Text())
		}
	}
	// Output:
	// reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} 3
	// reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /user/{id}"} 2
}
