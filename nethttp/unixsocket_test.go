package nethttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// TestLimitBehindAProxyOnAUnixSocket: a server listening on a unix socket, behind a proxy
// that writes X-Forwarded-For (nginx's proxy_pass to unix:...). Its requests' RemoteAddr
// holds no address, so every client shared one bucket; with WithTrustedProxies("unix")
// each forwarded client has its own, and a forged hop left of the proxy's buys none.
func TestLimitBehindAProxyOnAUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets here: %v", err)
	}
	var remote atomic.Value // the peer the handler saw
	remote.Store("")
	mux := http.NewServeMux()
	mux.Handle("GET /a", nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithTrustedProxies("unix"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { remote.Store(r.RemoteAddr); io.WriteString(w, "ok") })))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	t.Cleanup(client.CloseIdleConnections)
	for i, c := range []struct {
		xff  string
		want int
	}{
		{"198.51.100.7", 200},
		{"198.51.100.8", 200},
		{"198.51.100.7", 429},
		{"203.0.113.66, 198.51.100.8", 429}, // a forged hop before the proxy's
		{"198.51.100.9", 200},
	} {
		req, _ := http.NewRequest("GET", "http://app/a", nil)
		req.Header.Set("X-Forwarded-For", c.xff)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("request %d (X-Forwarded-For %q, peer %q): status %d, want %d", i+1, c.xff, remote.Load(), resp.StatusCode, c.want)
		}
	}
}
