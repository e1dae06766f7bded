package adaptertest

// The harness of the trusted-proxy recipe tests: each adapter's recipes_test.go holds its
// recipes of docs/operations.md verbatim (internal/repotest holds the two in step) and
// drives them through these helpers, so that every recipe meets the same forgeries and the
// same proxies.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// RecipePath is the route every trusted-proxy recipe limits to 3 per minute; the recipe
// helpers send their requests there.
const RecipePath = "/user/test"

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

// recipeStatus sends one GET RecipePath from peer with the header lines hdr (name, value,
// ...) and returns the status.
func recipeStatus(send func(Request) Response, peer string, hdr []string) int {
	return send(Request{Path: RecipePath, Remote: peer, Header: hdr}).Status
}

// ExpectForgeriesIgnored checks a recipe, served by send (ServeHTTP, or the adapter's own
// in-process server: it must answer from the Request's Remote as the peer), against
// clients that connect directly: each untrusted peer (private, loopback, link-local and
// public, IPv4 and IPv6) uses up its quota, then forges every header it can
// (X-Forwarded-For, X-Real-IP, Forwarded, CF-Connecting-IP, True-Client-IP, alone and
// together, one line or several): none may buy a fresh bucket. Using the quota up first,
// rather than counting from zero, keeps the check true whatever earlier tests left in the
// process-wide store.
func ExpectForgeriesIgnored(t testing.TB, send func(Request) Response) {
	t.Helper()
	for _, peer := range untrustedPeers {
		admitted := 0
		for range 4 {
			if recipeStatus(send, peer, nil) == http.StatusOK {
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
				if got := recipeStatus(send, peer, hdr); got != http.StatusTooManyRequests {
					t.Errorf("peer %s, quota used up, forging %q: status %d, want 429", peer, hdr, got)
					break forging
				}
			}
		}
	}
}

// A Proxy passes a client's request on: the app sees the proxy as the peer, and the header
// lines (name, value, ...) the proxy sends.
type Proxy func(client string, hdr []string) (peer string, out []string)

// AppendsForwardedFor is a proxy at 10.0.0.2 that appends the client's address to the
// X-Forwarded-For lines it received, joined into one, as nginx does.
func AppendsForwardedFor(client string, hdr []string) (string, []string) {
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

// TwoProxies is an edge proxy at 10.0.0.3 that adds its own X-Forwarded-For line, in
// front of AppendsForwardedFor.
func TwoProxies(client string, hdr []string) (string, []string) {
	return AppendsForwardedFor("10.0.0.3", append(slices.Clone(hdr), "X-Forwarded-For", client))
}

// SetsRealIP is a proxy at 10.0.0.2 that replaces X-Real-IP with the client's address and
// passes every other line on as the client sent it.
func SetsRealIP(client string, hdr []string) (string, []string) {
	var out []string
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) != "X-Real-Ip" {
			out = append(out, hdr[i], hdr[i+1])
		}
	}
	return "10.0.0.2:5000", append(out, "X-Real-IP", client)
}

// A ProxyKind is the kind of proxy in 10.0.0.0/8 a recipe is written for.
type ProxyKind int

const (
	// ForwardedFor proxies append the client's address to X-Forwarded-For: the recipe
	// must key clients behind one (AppendsForwardedFor) and behind two (TwoProxies).
	ForwardedFor ProxyKind = iota + 1
	// RealIP proxies replace X-Real-IP with the client's address (SetsRealIP) and pass
	// on the X-Forwarded-For the client forged.
	RealIP
)

// String returns the header k's proxies set.
func (k ProxyKind) String() string {
	switch k {
	case ForwardedFor:
		return "X-Forwarded-For"
	case RealIP:
		return "X-Real-IP"
	}
	return fmt.Sprintf("ProxyKind(%d)", int(k))
}

// proxies are the proxy chains, by name, a recipe for k runs behind.
func (k ProxyKind) proxies() []struct {
	name string
	pass Proxy
} {
	type named = struct {
		name string
		pass Proxy
	}
	switch k {
	case ForwardedFor:
		return []named{{"AppendsForwardedFor", AppendsForwardedFor}, {"TwoProxies", TwoProxies}}
	case RealIP:
		return []named{{"SetsRealIP", SetsRealIP}}
	}
	panic("adaptertest: unknown " + k.String())
}

// ExpectClientsApart checks a recipe for kind's proxies, served by send (as for
// ExpectForgeriesIgnored), behind each of them in turn: fresh clients (two IPv4, one
// IPv6) send four rounds of one request each through the proxy, every request forging
// every header the client can, and each client must get its own 3/1m, no more: 200 for
// three rounds, then 429.
func ExpectClientsApart(t testing.TB, send func(Request) Response, kind ProxyKind) {
	t.Helper()
	for _, p := range kind.proxies() {
		expectClientsApart(t, send, p.name, p.pass)
	}
}

// expectClientsApart is ExpectClientsApart behind one proxy chain, named name.
func expectClientsApart(t testing.TB, send func(Request) Response, name string, p Proxy) {
	t.Helper()
	clients := NewClients()
	for round := range 4 {
		want := http.StatusOK
		if round == 3 {
			want = http.StatusTooManyRequests
		}
		for n, client := range clients {
			all := forgeries(round*len(clients) + n)
			peer, hdr := p(client, all[len(all)-1])
			if got := recipeStatus(send, peer, hdr); got != want {
				t.Fatalf("client %s, request %d through %s (%q from %s): status %d, want %d",
					client, round+1, name, hdr, peer, got, want)
			}
		}
	}
}

// A Recipe is one trusted-proxy recipe served in-process: Send answers a Request from its
// Remote as the peer (ServeHTTP, or the adapter's own server), and Kind is the proxy the
// recipe is written for.
type Recipe struct {
	Kind ProxyKind
	Send func(Request) Response
}

// ExpectRecipesIgnoreForgeries runs ExpectForgeriesIgnored on each recipe, in a subtest
// named after its Kind.
func ExpectRecipesIgnoreForgeries(t *testing.T, recipes ...Recipe) {
	t.Helper()
	for _, r := range recipes {
		t.Run(r.Kind.String(), func(t *testing.T) { ExpectForgeriesIgnored(t, r.Send) })
	}
}

// ExpectRecipesKeyClientsApart runs ExpectClientsApart on each recipe behind its Kind's
// proxies, in a subtest named after its Kind.
func ExpectRecipesKeyClientsApart(t *testing.T, recipes ...Recipe) {
	t.Helper()
	for _, r := range recipes {
		t.Run(r.Kind.String(), func(t *testing.T) { ExpectClientsApart(t, r.Send, r.Kind) })
	}
}

var clientsSoFar atomic.Int64

// NewClients returns two IPv4 clients and an IPv6 one that no earlier call returned: the
// process-wide store outlives a test, and -count runs a test again in one process.
func NewClients() []string {
	n := clientsSoFar.Add(1)
	return []string{fmt.Sprintf("100.64.%d.%d", n/250, n%250+1), fmt.Sprintf("100.65.%d.%d", n/250, n%250+1),
		fmt.Sprintf("2001:db8:c:%x::1", n)}
}
