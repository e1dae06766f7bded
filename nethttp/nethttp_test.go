package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// newMux limits GET /user/{id} to 3 a minute, with opts, in a store of its own (fresh).
func newMux(opts ...core.Option) *http.ServeMux {
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	opts = append([]core.Option{fresh()}, opts...)
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, opts...)(ok))
	return mux
}

func get(h http.Handler, path, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestLimitThen429(t *testing.T) {
	mux := newMux()
	for i, path := range []string{"/user/1", "/user/2", "/user/3"} {
		w := get(mux, path, "192.0.2.7:1234")
		if w.Code != 200 {
			t.Fatalf("request %d: status %d", i+1, w.Code)
		}
		want := `"3/1m";r=` + string(rune('2'-i)) + ";t=60"
		if got := w.Header().Get("RateLimit"); got != want {
			t.Fatalf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"3/1m";q=3;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	}
	w := get(mux, "/user/4", "192.0.2.7:1234", "X-Forwarded-For", "203.0.113.9")
	if w.Code != 429 || w.Header().Get("Retry-After") != "60" || !strings.Contains(w.Body.String(), "Too Many Requests") {
		t.Fatalf("4th request (forged XFF): status %d Retry-After %q body %q; want 429, 60", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := get(mux, "/user/1", "192.0.2.8:1234"); w.Code != 200 {
		t.Fatalf("another client: status %d", w.Code)
	}
}
