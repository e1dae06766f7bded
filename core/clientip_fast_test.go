package core

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// TestCanonicalIPv4HostMatchesParsing checks the one-pass fast path of ClientKey against
// the slow one it stands for: hostOf, then netip. What it accepts must be what the slow
// path would key by; what it declines goes the slow way, so declining is always safe, but
// the common forms must be accepted.
func TestCanonicalIPv4HostMatchesParsing(t *testing.T) {
	inputs := []string{"", ":", "1.2.3.4", "1.2.3.4:80", "1.2.3.4:", "1.2.3.4::80", "1.2.3.4:80:90",
		"01.2.3.4:1", "1.2.3.04", "256.1.1.1:1", "1.2.3", "1.2.3.4.5", "1..3.4", ".1.2.3", "1.2.3.4 :1",
		"[1.2.3.4]:80", "::1", "[::1]:80", "::ffff:1.2.3.4", "a.b.c.d:1", "1.2.3.4:x", "255.255.255.255:65535",
		"0.0.0.0", "1.2.3.:4", "1.2.3.4%eth0"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789.:[]f%"
	for range 200000 {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(b))
	}
	for _, s := range inputs {
		host := hook.HostOf(s)
		a, err := netip.ParseAddr(host)
		want := err == nil && a.Is4() && a.String() == host
		got, ok := canonicalIPv4Host(s)
		if ok && (!want || got != host) {
			t.Fatalf("canonicalIPv4Host(%q) = %q, %v; hostOf gives %q, netip says %v", s, got, ok, host, want)
		}
	}
	for _, s := range []string{"1.2.3.4", "1.2.3.4:80", "192.0.2.1:65535", "0.0.0.0:0", "255.255.255.255"} {
		if _, ok := canonicalIPv4Host(s); !ok {
			t.Errorf("canonicalIPv4Host(%q) declined a common form", s)
		}
	}
}
