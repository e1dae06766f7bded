package main

import (
	"net"
	"net/http"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func serveNetHTTP(ln net.Listener) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })))
	return serveHTTP(ln, mux)
}
