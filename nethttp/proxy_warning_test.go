package nethttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// TestLimitBehindAnUntrustedProxyWarnsOnce: an application behind a reverse proxy on its
// own host (httputil.ReverseProxy standing for nginx: it appends X-Forwarded-For), on
// loopback. Without WithTrustedProxies every client shares the proxy's bucket, which
// gave five clients 200 200 200 429 429 with nothing logged. Now the limit warns once,
// naming the proxy's address; with the proxy trusted it keys each client apart and says
// nothing.
func TestLimitBehindAnUntrustedProxyWarnsOnce(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		var log warnLog
		opts := []core.Option{core.WithStore(core.NewMemoryStore(nil)), core.WithErrorHook(log.hook)}
		if trusted {
			opts = append(opts, core.WithTrustedProxies("127.0.0.1", "::1"))
		}
		mux := http.NewServeMux()
		mux.Handle("GET /a", nethttp.Limit(3, time.Minute, opts...)(
			http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
		app := httptest.NewServer(mux)
		target, _ := url.Parse(app.URL)
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		client := &http.Client{Timeout: 30 * time.Second}

		var got []int
		for i := range 5 {
			req, _ := http.NewRequest("GET", proxy.URL+"/a", nil)
			// Five clients as the trusted proxy passes them on. The client here is on
			// the proxy's host, in the trusted range, so the hop it writes itself counts:
			// on one host the proxy's own clients can pick their keys (docs/operations.md
			// recommends X-Real-IP or a unix socket there), which is not what this checks.
			req.Header.Set("X-Forwarded-For", "198.51.100."+string(rune('1'+i)))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got = append(got, resp.StatusCode)
		}
		client.CloseIdleConnections()
		proxy.Close()
		app.Close()

		errs := log.got()
		if !trusted {
			if want := []int{200, 200, 200, 429, 429}; !slices.Equal(got, want) {
				t.Errorf("untrusted proxy: statuses %v, want %v: a warning never changes a decision", got, want)
			}
			if len(errs) != 1 || !strings.Contains(errs[0], `core.WithTrustedProxies("127.0.0.1")`) {
				t.Errorf("untrusted proxy: warnings %q, want one naming core.WithTrustedProxies(\"127.0.0.1\")", errs)
			}
			continue
		}
		// Trusted, the walk from the right stops at the first untrusted hop: each client's.
		if want := []int{200, 200, 200, 200, 200}; !slices.Equal(got, want) {
			t.Errorf("trusted proxy: statuses %v, want %v", got, want)
		}
		if len(errs) != 0 {
			t.Errorf("trusted proxy: warned %q, want nothing", errs)
		}
	}
}
