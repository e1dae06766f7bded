// Command quickstart is the README's complete program: GET /hello limited to 3 requests a
// minute per client IP.
//
//	go run ./examples/quickstart
//	for i in 1 2 3 4; do curl -si localhost:8080/hello; done
package main

import (
	"io"
	"log"
	"net/http"
	"time"

	"github.com/reqlimit/reqlimit/nethttp"
)

func newMux() *http.ServeMux {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	mux := http.NewServeMux()
	// At most 3 requests in any minute per client; the 4th gets 429 with Retry-After.
	mux.Handle("GET /hello", nethttp.Limit(3, time.Minute)(hello))
	return mux
}

func main() {
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", newMux()))
}
