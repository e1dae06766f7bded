// Command example is a net/http application whose limits report to Prometheus: GET
// /user/test 3 a minute, GET /search 5 a second and 20 a minute, and their decisions on
// GET /metrics beside the Go runtime's.
//
//	go run ./promlimit/example -addr 127.0.0.1:8080
//	curl -s 127.0.0.1:8080/metrics | grep reqlimit_
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/promlimit"
)

// newMux serves the routes, and reg's metrics on /metrics.
func newMux(reg *prometheus.Registry) *http.ServeMux {
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, m.Option())(hello))
	mux.Handle("GET /search", nethttp.Limit(5, time.Second, core.WithRate(20, time.Minute), m.Option())(hello))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	// A registry of the app's own; promlimit.New(nil) and promhttp.Handler() would use
	// the process-wide default instead.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := newServer(*addr, newMux(reg))
	log.Printf("listening on http://%s, metrics on http://%s/metrics", *addr, *addr)
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
