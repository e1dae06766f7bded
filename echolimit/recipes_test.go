package echolimit_test

// The trusted-proxy recipes of docs/operations.md, verbatim (internal/repotest holds the
// two in step), driven through real requests: a recipe that compiles but lets a client
// pick its own key is the bug these tests are for.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
)

// proxyTrust trusts the proxies in 10.0.0.0/8 and no one else: Echo's extractors also
// trust every loopback, private and link-local peer unless told not to.
func proxyTrust() []echo.TrustOption {
	_, proxies, err := net.ParseCIDR("10.0.0.0/8")
	if err != nil {
		panic(err)
	}
	return []echo.TrustOption{
		echo.TrustLoopback(false), echo.TrustPrivateNet(false), echo.TrustLinkLocal(false),
		echo.TrustIPRange(proxies),
	}
}

// Proxies append to X-Forwarded-For.
func echoServer(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromXFFHeader(proxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// Proxies set X-Real-IP.
func echoServerRealIP(h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.IPExtractor = echo.ExtractIPFromRealIPHeader(proxyTrust()...)
	e.GET("/user/test", h, echolimit.Limit(3, time.Minute, core.WithClientIPFromFramework()))
	return e
}

// The private, loopback and link-local peers among untrustedPeers are the ones Echo would
// trust by default.
func TestEchoRecipesIgnoreForgedHeadersFromUntrustedPeers(t *testing.T) {
	t.Run("X-Forwarded-For", func(t *testing.T) { expectForgeriesIgnored(t, echoStatus(echoServer(echoOK))) })
	t.Run("X-Real-IP", func(t *testing.T) { expectForgeriesIgnored(t, echoStatus(echoServerRealIP(echoOK))) })
}

func TestEchoRecipesKeyClientsBehindProxies(t *testing.T) {
	t.Run("X-Forwarded-For", func(t *testing.T) {
		do := echoStatus(echoServer(echoOK))
		expectClientsApart(t, do, appendsForwardedFor)
		expectClientsApart(t, do, twoProxies)
	})
	t.Run("X-Real-IP", func(t *testing.T) {
		expectClientsApart(t, echoStatus(echoServerRealIP(echoOK)), setsRealIP)
	})
}

func echoOK(c echo.Context) error { return c.String(http.StatusOK, "ok") }

func echoStatus(h http.Handler) func(peer string, hdr []string) int {
	return func(peer string, hdr []string) int {
		r := httptest.NewRequest("GET", "/user/test", nil)
		r.RemoteAddr = peer
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
}

// The harness below is the same in every adapter's recipes_test.go.

// untrustedPeers connect directly. Echo's extractors trust the first three unless told
// not to: a recipe that forgets to lets their forged headers in.
var untrustedPeers = []string{"192.168.1.5:40000", "127.0.0.1:40000", "[fe80::1]:40000", "203.0.113.9:40000", "[2001:db8:ffff::9]:40000"}

// forgeries are the header lines (name, value, ...) a client may add to pick its own key.
// i makes every address new, so that a forgery that counted would get a fresh bucket.
func forgeries(i int) [][]string {
	a, b := fmt.Sprintf("198.51.100.%d", i+1), fmt.Sprintf("2001:db8:%x::1", i+1)
	return [][]string{
		{"X-Forwarded-For", a},
		{"X-Forwarded-For", a + ", 10.0.0.9"},
		{"X-Forwarded-For", "10.0.0.9, " + a},
		{"X-Forwarded-For", a, "X-Forwarded-For", b},
		{"X-Real-IP", a},
		{"X-Real-IP", a, "X-Real-IP", b},
		{"Forwarded", "for=" + a},
		{"Forwarded", `for="[` + b + `]"`},
		{"X-Forwarded-For", a, "X-Forwarded-For", "10.0.0.9, " + b, "X-Real-IP", a,
			"Forwarded", "for=" + a, "CF-Connecting-IP", a, "True-Client-IP", a},
	}
}

// expectForgeriesIgnored has each untrusted peer use up its quota, then forge every header
// it can: none may buy a fresh bucket. Using the quota up first, rather than counting from
// zero, keeps the check true whatever earlier tests left in the process-wide store.
func expectForgeriesIgnored(t *testing.T, do func(peer string, hdr []string) int) {
	t.Helper()
	for _, peer := range untrustedPeers {
		admitted := 0
		for range 4 {
			if do(peer, nil) == http.StatusOK {
				admitted++
			}
		}
		if admitted > 3 {
			t.Errorf("peer %s: %d of 4 requests admitted under 3/1m", peer, admitted)
			continue
		}
	forging:
		for i := range 3 {
			for _, hdr := range forgeries(i) {
				if got := do(peer, hdr); got != http.StatusTooManyRequests {
					t.Errorf("peer %s, quota used up, forging %q: status %d, want 429", peer, hdr, got)
					break forging
				}
			}
		}
	}
}

// A proxy passes a client's request on: the app sees the proxy as the peer, and the header
// lines the proxy sends.
type proxy func(client string, hdr []string) (peer string, out []string)

// appendsForwardedFor is a proxy at 10.0.0.2 that appends the client's address to the
// X-Forwarded-For lines it received, joined into one, as nginx does.
func appendsForwardedFor(client string, hdr []string) (string, []string) {
	var chain, out []string
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) == "X-Forwarded-For" {
			chain = append(chain, hdr[i+1])
		} else {
			out = append(out, hdr[i], hdr[i+1])
		}
	}
	return "10.0.0.2:5000", append(out, "X-Forwarded-For", strings.Join(append(chain, client), ", "))
}

// twoProxies is an edge proxy at 10.0.0.3 that adds its own X-Forwarded-For line, in
// front of appendsForwardedFor.
func twoProxies(client string, hdr []string) (string, []string) {
	return appendsForwardedFor("10.0.0.3", append(slices.Clone(hdr), "X-Forwarded-For", client))
}

// setsRealIP is a proxy at 10.0.0.2 that replaces X-Real-IP with the client's address and
// passes every other line on as the client sent it.
func setsRealIP(client string, hdr []string) (string, []string) {
	var out []string
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) != "X-Real-Ip" {
			out = append(out, hdr[i], hdr[i+1])
		}
	}
	return "10.0.0.2:5000", append(out, "X-Real-IP", client)
}

// expectClientsApart sends four rounds of one request per client through p, each request
// forging every header the client can: each client gets its own 3/1m, no more.
func expectClientsApart(t *testing.T, do func(peer string, hdr []string) int, p proxy) {
	t.Helper()
	clients := newClients()
	for round := range 4 {
		want := http.StatusOK
		if round == 3 {
			want = http.StatusTooManyRequests
		}
		for n, client := range clients {
			all := forgeries(round*len(clients) + n)
			peer, hdr := p(client, all[len(all)-1])
			if got := do(peer, hdr); got != want {
				t.Fatalf("client %s, request %d through the proxy (%q from %s): status %d, want %d",
					client, round+1, hdr, peer, got, want)
			}
		}
	}
}

var clientsSoFar int

// newClients returns two IPv4 clients and an IPv6 one that no earlier request came from:
// the process-wide store outlives a test, and -count runs a test again in one process.
func newClients() []string {
	clientsSoFar++
	n := clientsSoFar
	return []string{fmt.Sprintf("100.64.%d.%d", n/250, n%250+1), fmt.Sprintf("100.65.%d.%d", n/250, n%250+1),
		fmt.Sprintf("2001:db8:c:%x::1", n)}
}
