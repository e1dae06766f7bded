package nethttp_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// For a CONNECT request to /files/N under the pattern /files/{id}/, ServeMux.Handler
// returns its redirect with the path /files/N/ where the pattern goes. WithMux must not
// take that for a route, or a client mints a bucket per made-up path.
func TestWithMuxConnectCannotMintBuckets(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/files/{id}/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	h := nethttp.Limit(1, time.Hour, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(mux))(mux)
	admitted := 0
	for i := range 20 {
		raw := fmt.Sprintf("CONNECT /files/%d HTTP/1.1\r\nHost: example.com\r\n\r\n", i)
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		r.RemoteAddr = "192.0.2.7:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusTooManyRequests {
			admitted++
		}
	}
	if admitted != 1 {
		t.Fatalf("1/1h limit around the mux: one client admitted %d of 20 CONNECT requests to made-up paths, want 1", admitted)
	}
	// A matched CONNECT still has its route's own bucket, apart from the unmatched ones'.
	r, _ := http.ReadRequest(bufio.NewReader(strings.NewReader("CONNECT /files/1/ HTTP/1.1\r\nHost: example.com\r\n\r\n")))
	r.RemoteAddr = "192.0.2.7:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("CONNECT to a registered route: status %d, want 200 (its own bucket)", w.Code)
	}
}

// WithMux(nil) is refused where the limit is declared; it registered, and every request
// then panicked on the nil mux.
func TestWithMuxNilIsRefusedAtRegistration(t *testing.T) {
	msg := registering(func() { nethttp.Limit(3, time.Minute, nethttp.WithMux(nil)) })
	if !strings.Contains(msg, "WithMux(nil)") || !strings.Contains(msg, "ServeMux") {
		t.Errorf("Limit with WithMux(nil): panicked %q; want WithMux(nil) refused, naming the mux wanted", msg)
	}
	if _, err := nethttp.New("3/1m", nethttp.WithMux(nil)); err == nil || !strings.Contains(err.Error(), "WithMux(nil)") {
		t.Errorf("New with WithMux(nil): %v; want WithMux(nil) refused", err)
	}
}
