package nethttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A limit around a whole ServeMux, told to ask it with WithMux, keys every route of that
// mux apart, also mounted under an outer ServeMux (the common /api/ prefix, through
// http.StripPrefix), where requests arrive with r.Pattern set to the outer pattern.
func TestWithMuxUnderAnOuterMuxKeysInnerRoutesApart(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	inner := http.NewServeMux()
	inner.Handle("GET /a", ok)
	inner.Handle("GET /b", ok)
	limited := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(inner))(inner)

	outer := http.NewServeMux()
	outer.Handle("/api/", http.StripPrefix("/api", limited))

	var got []int
	for _, path := range []string{"/api/a", "/api/b", "/api/a"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.9:5555"
		rec := httptest.NewRecorder()
		outer.ServeHTTP(rec, req)
		got = append(got, rec.Code)
	}
	if want := []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v: GET /b was counted in GET /a's bucket", got, want)
	}
}
