package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestUnixSocketProxyTrustedAsUnix: behind a proxy on a unix socket (nginx proxy_pass to
// unix:/run/app.sock) the peer has no address, and every client shared one bucket, with
// no option to trust the proxy. WithTrustedProxies("unix") trusts such a peer: its
// forwarded header names the client, walked from the right as from any trusted proxy.
// TCP peers stay untrusted unless listed, and without the token nothing changes.
func TestUnixSocketProxyTrustedAsUnix(t *testing.T) {
	l := limiter(t, core.WithTrustedProxies("unix", "10.0.0.0/8"))
	for i, c := range []struct {
		peer string
		r    fakeRequest
		want string
	}{
		{"", req("X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"@", req("X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"/run/app.sock", req("X-Forwarded-For", "198.51.100.8"), "198.51.100.8"},
		// A forged hop left of the proxy's, a trusted hop right of the client.
		{"", req("X-Forwarded-For", "203.0.113.66, 198.51.100.7, 10.2.2.2"), "198.51.100.7"},
		{"", req("X-Forwarded-For", "2001:db8::7"), "2001:db8::/64"},
		{"", req("X-Forwarded-For", "::ffff:198.51.100.7"), "198.51.100.7"},
		// No address forwarded: the peer's shared bucket.
		{"", req(), "unknown"},
		{"", req("X-Forwarded-For", "garbage"), "unknown"},
		{"/run/app.sock", req("X-Forwarded-For", "garbage"), "/run/app.sock"},
		// A TCP peer not listed: its header is ignored.
		{"198.51.100.9:80", req("X-Forwarded-For", "203.0.113.66"), "198.51.100.9"},
	} {
		if got := core.ClientKey(l, c.peer, c.r); got != c.want {
			t.Errorf("case %d (%q %v): key %q, want %q", i, c.peer, c.r.h, got, c.want)
		}
	}
	// Without the token a unix peer's header is ignored.
	plain := limiter(t, core.WithTrustedProxies("10.0.0.0/8"))
	if got := core.ClientKey(plain, "", req("X-Forwarded-For", "198.51.100.7")); got != "unknown" {
		t.Errorf("without \"unix\": key %q, want the shared unknown bucket", got)
	}
	// With "unix" alone, a single-address header too, and the allow list reads the
	// forwarded client.
	single := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithTrustedProxies("unix"),
		core.WithForwardedHeader("X-Real-IP"), core.WithAllowList("198.51.100.0/24"))
	for i, c := range []struct {
		ip      string
		allowed []bool
	}{
		{"198.51.100.7", []bool{true, true, true}}, // on the allow list
		{"203.0.113.5", []bool{true, false}},
		{"203.0.113.6", []bool{true, false}},
	} {
		for j, want := range c.allowed {
			in := adapter.Input{Route: "/r", Peer: "@", Request: req("X-Real-Ip", c.ip)}
			if got := single.Check(context.Background(), in, nil).Allowed; got != want {
				t.Errorf("client %d (%s), request %d: allowed %v, want %v", i, c.ip, j+1, got, want)
			}
		}
	}
}
