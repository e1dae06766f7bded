package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// FuzzPeerKeyUnparsedMatchesParsed checks the contract of clientKey's shortcut: once a
// limit has stopped looking for an untrusted proxy (after core.MaxLooks requests without
// cause, or from the start with warnings off or WithClientIPFromFramework), and trusts no
// proxy, it keys a peer without parsing it, and that key is exactly the key a limit still
// looking (parsing every peer) gives the same peer: for any peer string, whatever the
// IPv6 prefix, with or without forged forwarded headers, and as the fallback of a key
// function that fails. Under plain go test it runs its seed corpus: generated peers
// (deterministic seed) of every shape an adapter might pass, and mutations of them.
func FuzzPeerKeyUnparsedMatchesParsed(f *testing.F) {
	for _, p := range genPeers(rand.New(rand.NewPCG(34, 1)), 1500) {
		f.Add(p)
	}
	quiet := core.WithErrorHook(func(context.Context, error) {})
	forged := req("X-Forwarded-For", "203.0.113.1", "X-Real-Ip", "203.0.113.2", "Forwarded", "for=203.0.113.3")
	failing := core.WithKey(func(core.Request) (string, error) { return "", errors.New("no key") })
	variants := map[string][]core.Option{"a failing key function": {failing}}
	for _, bits := range []int{1, 48, 64, 127, 128} {
		variants[fmt.Sprintf("WithIPv6Prefix(%d)", bits)] = []core.Option{core.WithIPv6Prefix(bits)}
	}
	// A limit whose key the observer reports: a failing key function's fallback is seen
	// only there.
	type limit struct {
		l    adapter.Limiter
		seen *string
	}
	newLimit := func(opts []core.Option, extra ...core.Option) limit {
		seen := new(string)
		all := append([]core.Option{core.WithStore(core.NewMemoryStore(nil)), quiet,
			core.WithObserver(func(e core.Event) { *seen = e.Key })}, opts...)
		l, err := adapter.New(1<<30, time.Hour, append(all, extra...)...)
		if err != nil {
			f.Fatal(err)
		}
		return limit{l, seen}
	}
	keyOf := func(l limit, peer string, r core.Request) string {
		*l.seen = "(none)"
		l.l.Check(context.Background(), adapter.Input{Route: "/", Peer: peer, Request: r}, nil)
		return *l.seen
	}
	// The limits that stopped looking: driven past MaxLooks, warnings off, or keyed by
	// the framework's client IP.
	stopped := map[string]map[string]limit{}
	for name, opts := range variants {
		var warned []string
		driven := newLimit(opts, core.WithErrorHook(func(_ context.Context, err error) {
			if strings.Contains(err.Error(), "WithTrustedProxies") {
				warned = append(warned, err.Error())
			}
		}))
		for range core.MaxLooks {
			driven.l.Check(context.Background(), adapter.Input{Route: "/", Peer: "198.51.100.7:1", Request: req()}, nil)
		}
		// It stopped: a local proxy's header now goes unremarked.
		driven.l.Check(context.Background(), adapter.Input{Route: "/", Peer: "10.0.0.1:1", Request: forged}, nil)
		if len(warned) != 0 {
			f.Fatalf("%s: driven past MaxLooks, still warned: %q", name, warned)
		}
		stopped[name] = map[string]limit{
			"stopped looking":           driven,
			"warnings off":              newLimit(opts, core.WithWarnings(false)),
			"WithClientIPFromFramework": newLimit(opts, core.WithClientIPFromFramework()),
		}
	}
	f.Fuzz(func(t *testing.T, peer string) {
		for name, opts := range variants {
			for _, r := range []core.Request{forged, req(), nil} {
				looking := newLimit(opts) // fresh for each peer: a warning would stop its looking
				want, wantDirect := keyOf(looking, peer, r), core.ClientKey(looking.l, peer, r)
				for how, s := range stopped[name] {
					if got := keyOf(s, peer, r); got != want {
						t.Errorf("%s, %s, request %v: peer %q keyed %q, %q while looking", name, how, r != nil, peer, got, want)
					}
					if got := core.ClientKey(s.l, peer, r); got != wantDirect {
						t.Errorf("%s, %s, request %v: peer %q: client key %q, %q while looking", name, how, r != nil, peer, got, wantDirect)
					}
				}
			}
		}
	})
}

// genPeers returns n peer strings: canonical and non-canonical IPv4 with and without
// ports, zones, brackets, IPv6 and IPv4-mapped IPv6, unix socket names, the empty
// string, spaces, non-ASCII and garbage bytes, long strings, and mutations of them.
func genPeers(rng *rand.Rand, n int) []string {
	seeds := []string{
		"192.0.2.1", "192.0.2.1:5555", "192.0.2.01", "192.0.2.01:80", "0192.0.2.1", "192.0.2.1.", "192.0.2.1.:80",
		"192.0.2.1%eth0", "192.0.2.1%eth0:80", "192.0.2.1%", "%eth0", "%", "[192.0.2.1]", "[192.0.2.1]:80", "[192.0.2.1",
		"[192.0.2.1%eth0]:80", "300.1.1.1", "300.1.1.1:80", "1.2.3", "1.2.3.4.5", "127.1", "0x7f.0.0.1", "4294967295",
		"0.0.0.0", "255.255.255.255", "255.255.255.256", "10.0.0.1:0", "10.0.0.1:", ":80", ":", "::", "::1", "[::1]:8080",
		"2001:db8::1", "[2001:db8::1]:443", "2001:db8::1%eth0", "[fe80::1%eth0]:80", "::ffff:192.0.2.1",
		"[::ffff:192.0.2.1]:80", "::ffff:10.0.0.1", "::ffff:c000:201", "[::ffff:c000:201]:1", "64:ff9b::192.0.2.1",
		"192.0.2.1:5555, 198.51.100.1:1111", "192.0.2.1:80:90", "@", "@abstract", "/run/app.sock", "/", "", " ", " 192.0.2.1",
		"192.0.2.1 ", "192.0.2.1\n", "192.0.2.1\x00", "localhost", "localhost:80", "example.com:443", "１９２.０.２.１",
		"192.0.2.١", "19\u00a02.0.2.1", "192.0.2.1\u200b", "\xff\xfe", "[", "]", "[]", "[]:80", "[:80", "unknown", "1e1.1.1.1",
		"+1.2.3.4", "-1.2.3.4", "1..2.3", ".1.2.3", "01.02.03.04", "1.2.3.4/24", "1.2.3.4/24:80", strings.Repeat("1", 5000),
		strings.Repeat("1.", 2000) + "1", strings.Repeat(":", 300), strings.Repeat("a", 70000),
	}
	const alphabet = "0123456789abcdefABCDEF.:%[]/@ \x00\xff,x"
	peers := append([]string(nil), seeds...)
	for len(peers) < n {
		b := []byte(seeds[rng.IntN(len(seeds))])
		if len(b) > 200 {
			b = b[:rng.IntN(200)]
		}
		for range 1 + rng.IntN(4) {
			i := rng.IntN(len(b) + 1)
			switch c := alphabet[rng.IntN(len(alphabet))]; rng.IntN(3) {
			case 0: // insert
				b = append(b[:i], append([]byte{c}, b[i:]...)...)
			case 1: // replace
				if i < len(b) {
					b[i] = c
				}
			default: // delete
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			}
		}
		peers = append(peers, string(b))
	}
	return peers
}
