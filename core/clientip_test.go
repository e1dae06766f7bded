package core_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// fakeRequest is a core.Request over a header map, for key derivation tests.
type fakeRequest struct{ h http.Header }

func (f fakeRequest) Context() context.Context     { return context.Background() }
func (f fakeRequest) Method() string               { return "GET" }
func (f fakeRequest) Path() string                 { return "/" }
func (f fakeRequest) Route() string                { return "/" }
func (f fakeRequest) Header(name string) string    { return f.h.Get(name) }
func (f fakeRequest) Headers(name string) []string { return f.h.Values(name) }
func (f fakeRequest) RemoteAddr() string           { return "" }
func (f fakeRequest) Value(key any) any            { return nil }

func req(kv ...string) fakeRequest {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return fakeRequest{h}
}

func limiter(t *testing.T, opts ...core.Option) adapter.Limiter {
	t.Helper()
	l, err := adapter.New(3, time.Minute, append([]core.Option{core.WithStore(core.NewMemoryStore(nil))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestClientKeyFromPeer: the key of each kind of peer, the same while the limit looks for
// an untrusted proxy (parsing every peer) and after it stopped (leaving IPv4 peers
// unparsed).
func TestClientKeyFromPeer(t *testing.T) {
	quiet := core.WithErrorHook(func(context.Context, error) {}) // a warning would stop the looking
	stopped := limiter(t)
	for range core.MaxLooks {
		stopped.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.0.2.200:1", Request: req()}, nil)
	}
	forged := req("X-Forwarded-For", "203.0.113.1", "X-Real-Ip", "203.0.113.2", "Forwarded", "for=203.0.113.3")
	for peer, want := range map[string]string{
		"192.0.2.1:5555":                    "192.0.2.1",
		"192.0.2.1":                         "192.0.2.1", // no port
		"[2001:db8:1:2:3:4:5:6]:443":        "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":        "2001:db8:1:2::/64", // same /64, same bucket
		"2001:db8:1:2:3:4:5:6":              "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":                 "fe80::/64", // zone dropped
		"[::ffff:192.0.2.9]:80":             "192.0.2.9", // IPv4-mapped is IPv4
		"":                                  "unknown",
		"@":                                 "@", // a unix socket: one shared bucket
		"/run/app.sock":                     "/run/app.sock",
		"not an address":                    "not an address",
		"[::1]:8080":                        "::/64",
		"300.1.1.1:80":                      "300.1.1.1", // unparsable: kept as a name, still limited
		"192.0.2.1:5555, 198.51.100.1:1111": "192.0.2.1:5555, 198.51.100.1:1111",
		"192.0.2.01:80":                     "192.0.2.01", // not canonical: kept as a name
		"192.0.2.1%eth0":                    "192.0.2.1%eth0",
	} {
		for name, l := range map[string]adapter.Limiter{"looking": limiter(t, quiet), "stopped looking": stopped} {
			if got := core.ClientKey(l, peer, forged); got != want {
				t.Errorf("%s: peer %q: key %q, want %q", name, peer, got, want)
			}
		}
	}
}

func TestClientKeyIPv6Prefix(t *testing.T) {
	if got := core.ClientKey(limiter(t, core.WithIPv6Prefix(128)), "[2001:db8::1]:1", nil); got != "2001:db8::1" {
		t.Fatalf("/128: %q", got)
	}
	if got := core.ClientKey(limiter(t, core.WithIPv6Prefix(48)), "[2001:db8:1:2::1]:1", nil); got != "2001:db8:1::/48" {
		t.Fatalf("/48: %q", got)
	}
	if _, err := adapter.New(1, time.Second, core.WithIPv6Prefix(129)); err == nil {
		t.Fatal("/129 accepted")
	}
}

func TestClientKeyTrustedProxies(t *testing.T) {
	l := limiter(t, core.WithTrustedProxies("10.0.0.0/8", "192.0.2.10"))
	cases := []struct {
		peer string
		r    fakeRequest
		want string
	}{
		// From a trusted proxy: the rightmost untrusted hop is the client.
		{"10.1.1.1:80", req("X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		// The client prepended a forged hop: it is left of the real one and ignored.
		{"10.1.1.1:80", req("X-Forwarded-For", "203.0.113.66, 198.51.100.7"), "198.51.100.7"},
		// Two trusted hops, then the client; the header split over two lines.
		{"10.1.1.1:80", req("X-Forwarded-For", "198.51.100.7, 10.2.2.2", "X-Forwarded-For", "192.0.2.10"), "198.51.100.7"},
		// Every hop trusted: the leftmost is the best we know.
		{"10.1.1.1:80", req("X-Forwarded-For", "10.3.3.3, 10.2.2.2"), "10.3.3.3"},
		// Garbage stops the walk at the last good address.
		{"10.1.1.1:80", req("X-Forwarded-For", "198.51.100.7, garbage"), "10.1.1.1"},
		{"10.1.1.1:80", req("X-Forwarded-For", ",,,"), "10.1.1.1"},
		// Not from a trusted proxy: headers are ignored.
		{"198.51.100.9:80", req("X-Forwarded-For", "203.0.113.66"), "198.51.100.9"},
		// Only X-Forwarded-For is read: other forwarded headers are the client's to forge.
		{"10.1.1.1:80", req("X-Real-Ip", "198.51.100.8"), "10.1.1.1"},
		{"10.1.1.1:80", req("Forwarded", "for=198.51.100.8"), "10.1.1.1"},
		{"10.1.1.1:80", req(), "10.1.1.1"},
	}
	for i, c := range cases {
		if got := core.ClientKey(l, c.peer, c.r); got != c.want {
			t.Errorf("case %d (%s %v): key %q, want %q", i, c.peer, c.r.h, got, c.want)
		}
	}
	// The header the proxies set, and only it: a client-sent X-Forwarded-For beside it, which
	// such a proxy passes on untouched, must not choose the key.
	forged := "X-Forwarded-For"
	for _, c := range []struct {
		header string
		r      fakeRequest
		want   string
	}{
		{"X-Real-IP", req("X-Real-Ip", "198.51.100.8", forged, "1.1.1.1"), "198.51.100.8"},
		{"X-Real-IP", req("X-Real-Ip", "nonsense", forged, "1.1.1.1"), "10.1.1.1"},
		{"x-real-ip", req("X-Real-Ip", "198.51.100.8"), "198.51.100.8"}, // any spelling
		{"CF-Connecting-IP", req("Cf-Connecting-Ip", "2001:db8::9", forged, "1.1.1.1"), "2001:db8::/64"},
		// RFC 7239 Forwarded, with quotes, a port and IPv6, walked from the right.
		{"Forwarded", req("Forwarded", `for=203.0.113.66, for="[2001:db8::7]:4711";proto=https`, forged, "2.2.2.2"), "2001:db8::/64"},
		{"Forwarded", req("Forwarded", "for=unknown"), "10.1.1.1"},
		{"Forwarded", req(forged, "2.2.2.2"), "10.1.1.1"},
	} {
		l := limiter(t, core.WithTrustedProxies("10.0.0.0/8"), core.WithForwardedHeader(c.header))
		if got := core.ClientKey(l, "10.1.1.1:80", c.r); got != c.want {
			t.Errorf("%s, %v: key %q, want %q", c.header, c.r.h, got, c.want)
		}
	}
	if _, err := adapter.New(1, time.Second, core.WithTrustedProxies("10.0.0.0/33")); err == nil || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Fatalf("bad CIDR: %v", err)
	}
}

func TestIPv4KeyDoesNotAllocate(t *testing.T) {
	l := limiter(t)
	if n := testing.AllocsPerRun(100, func() { core.ClientKey(l, "192.0.2.1:5555", nil) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// An IPv6 client, keyed by its prefix, and a client behind a trusted proxy send again and
// again: their keys must not be formatted anew, allocating, on every request.
func TestRepeatedClientKeyDoesNotAllocate(t *testing.T) {
	proxied := fakeRequest{h: map[string][]string{"X-Forwarded-For": {"203.0.113.9, 198.51.100.8", "10.2.2.2"}}}
	for _, c := range []struct {
		name, peer string
		r          core.Request
		opts       []core.Option
	}{
		{"IPv6 /64", "[2001:db8::1]:5555", nil, nil},
		{"IPv6 /128", "[2001:db8::1]:5555", nil, []core.Option{core.WithIPv6Prefix(128)}},
		{"IPv4-mapped", "[::ffff:192.0.2.1]:5555", nil, nil},
		{"trusted proxy", "10.1.1.1:80", proxied, []core.Option{core.WithTrustedProxies("10.0.0.0/8")}},
	} {
		l := limiter(t, c.opts...)
		core.ClientKey(l, c.peer, c.r)
		least := 1e9
		for range 3 {
			least = min(least, testing.AllocsPerRun(100, func() { core.ClientKey(l, c.peer, c.r) }))
		}
		if least != 0 {
			t.Errorf("%s: %v allocations per key", c.name, least)
		}
	}
}

// Keys remembered for one address are never another's: many more addresses than the
// cache has slots, in several groupings, each key as netip formats it.
// An adapter's cached peer string (adapter.PeerString) keys its client as the address parsed
// from any other spelling of it does: IPv4, IPv4-mapped, zoned and grouped IPv6 alike.
func TestCanonicalPeerKeysAsParsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"),
		netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("::1")}
	for range 2000 {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:], rng.Uint64())
		binary.BigEndian.PutUint64(b[8:], rng.Uint64())
		addrs = append(addrs, netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom16(b))
	}
	for _, opt := range []core.Option{core.WithIPv6Prefix(64), core.WithIPv6Prefix(128), core.WithTrustedProxies("10.0.0.0/8")} {
		l := limiter(t, opt)
		for _, a := range addrs {
			want := core.ClientKey(l, netip.AddrPortFrom(a, 443).String(), nil)
			if got := core.ClientKey(l, adapter.PeerString(a), nil); got != want {
				t.Fatalf("%v: cached peer %q keyed %q, parsed %q", a, adapter.PeerString(a), got, want)
			}
		}
	}
}

func TestClientKeyCacheNeverMixesAddresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bits := range []int{48, 64, 128} {
		l := limiter(t, core.WithIPv6Prefix(bits))
		addrs := make([]netip.Addr, 5000)
		for i := range addrs {
			var b [16]byte
			binary.BigEndian.PutUint64(b[:], 0x20010db800000000|uint64(rng.IntN(64))<<16)
			binary.BigEndian.PutUint64(b[8:], rng.Uint64()%8)
			addrs[i] = netip.AddrFrom16(b)
		}
		for round := range 3 {
			for _, a := range addrs {
				want := a.String()
				if bits < 128 {
					want = netip.PrefixFrom(a, bits).Masked().String()
				}
				if got := core.ClientKey(l, netip.AddrPortFrom(a, 80).String(), nil); got != want {
					t.Fatalf("/%d round %d: %v keyed %q, want %q", bits, round, a, got, want)
				}
			}
		}
	}
	// IPv4 0.0.0.0 and IPv6 ::/32 have the same bits and the same length: the cache must
	// keep them apart.
	l32 := limiter(t, core.WithIPv6Prefix(32))
	for range 3 {
		for peer, want := range map[string]string{"[::ffff:0.0.0.0]:80": "0.0.0.0", "[::1]:80": "::/32"} {
			if got := core.ClientKey(l32, peer, nil); got != want {
				t.Fatalf("%s keyed %q, want %q", peer, got, want)
			}
		}
	}
	l := limiter(t, core.WithTrustedProxies("10.0.0.0/8"))
	for i := range 3000 {
		a := netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})
		r := fakeRequest{h: map[string][]string{"X-Forwarded-For": {a.String()}}}
		if got := core.ClientKey(l, "10.1.1.1:80", r); got != a.String() {
			t.Fatalf("forwarded %v keyed %q", a, got)
		}
	}
}

// A proxy range written IPv4-mapped (as dual-stack tooling prints it) means the IPv4
// range, as it does in WithAllowList: it was accepted and trusted nobody, keying every
// client behind the proxy by the proxy's address.
func TestTrustedProxiesIPv4MappedPrefix(t *testing.T) {
	for _, trusted := range []string{"10.0.0.0/8", "::ffff:10.0.0.0/104", "::ffff:10.0.0.1/128", "::ffff:10.0.0.1"} {
		l := limiter(t, core.WithTrustedProxies(trusted))
		for _, peer := range []string{"10.0.0.1:443", "[::ffff:10.0.0.1]:443"} {
			if got := core.ClientKey(l, peer, req("X-Forwarded-For", "198.51.100.7")); got != "198.51.100.7" {
				t.Errorf("WithTrustedProxies(%q), peer %s forwarding for 198.51.100.7: key %q, want the client's", trusted, peer, got)
			}
		}
		// A mapped hop in the chain is the same proxy.
		if got := core.ClientKey(l, "10.0.0.1:443", req("X-Forwarded-For", "198.51.100.7, ::ffff:10.0.0.1")); got != "198.51.100.7" {
			t.Errorf("WithTrustedProxies(%q): a mapped trusted hop: key %q, want the client's", trusted, got)
		}
	}
}
