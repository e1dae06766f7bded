package adaptertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// TrailerForgery checks, for frameworks on fasthttp, that a client behind a trusted proxy
// cannot name its own key in a chunked request's trailer. fasthttp adds the trailer's fields
// to the request header after the header's own lines, refusing X-Forwarded-* and X-Real-IP
// there but not CF-Connecting-IP, True-Client-IP or Forwarded; a proxy that passes trailers
// on (Go's httputil.ReverseProxy does) leaves them as the client wrote them. Trailers exist
// only on the wire: the requests go over a loopback connection.
//
// serve starts an app on ln with one route, POST /t, limited to 1 per minute with opts
// and answering 200; when proxyHeader is not "", the framework's own trusted-proxy
// configuration trusts loopback peers and reads its client IP from proxyHeader.
func TrailerForgery(t *testing.T, serve func(t *testing.T, ln net.Listener, proxyHeader string, opts []core.Option)) {
	forged := func(prefix string) func(int) string {
		return func(i int) string { return fmt.Sprintf("%s198.51.100.%d", prefix, i+1) }
	}
	for _, c := range []struct {
		name      string
		framework bool   // trusted by the framework, else by core
		header    string // the proxy's header line, and the client's trailer
		proxy     string // the value the proxy wrote
		forged    func(i int) string
	}{
		{"framework-trust-cf-connecting-ip", true, "CF-Connecting-IP", "203.0.113.7", forged("")},
		{"framework-trust-true-client-ip", true, "True-Client-IP", "203.0.113.7", forged("")},
		// What the adapters' docs recommend for Forwarded.
		{"core-trusted-proxies-forwarded", false, "Forwarded", "for=203.0.113.7", forged("for=")},
		{"core-trusted-proxies-cf-connecting-ip", false, "CF-Connecting-IP", "203.0.113.7", forged("")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			opts := []core.Option{core.WithStore(core.NewMemoryStore(nil)),
				core.WithObserver(func(e core.Event) { mu.Lock(); keys = append(keys, e.Key); mu.Unlock() })}
			proxyHeader := c.header
			if !c.framework {
				proxyHeader = ""
				opts = append(opts, core.WithTrustedProxies("127.0.0.0/8"), core.WithForwardedHeader(c.header))
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serve(t, ln, proxyHeader, opts)
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			// One client (the proxy says so in its header line) sends three requests, each
			// with a chunked body whose trailer names another address.
			for i := range 3 {
				fmt.Fprintf(conn, "POST /t HTTP/1.1\r\nHost: app\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n"+
					"1\r\nx\r\n0\r\n%s: %s\r\n\r\n", c.header, c.proxy, c.header, c.forged(i))
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := http.StatusOK
				if i > 0 {
					want = http.StatusTooManyRequests
				}
				if resp.StatusCode != want {
					mu.Lock()
					defer mu.Unlock()
					t.Fatalf("request %d from client %s, trailer %s: %s: status %d, want %d (keys so far %q)",
						i+1, c.proxy, c.header, c.forged(i), resp.StatusCode, want, keys)
				}
			}
		})
	}
}
