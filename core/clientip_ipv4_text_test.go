package core

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// TestCanonicalIPv4HostMatchesParsing checks clientKey's one-pass reading of a dotted-quad
// peer against what it stands for: hostOf, then netip. What it accepts must be the host
// and address netip gives; what it declines goes through netip, so declining is always
// safe, but the common forms must be accepted.
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
	// Near-addresses: four numbers (some too large, some with leading zeros, some
	// missing), separators mostly dots, then nothing, a port, a second colon, a NUL or
	// long text.
	num := func() string {
		switch rng.IntN(8) {
		case 0:
			return ""
		case 1:
			return "0" + strconv.Itoa(rng.IntN(300))
		case 2:
			return strconv.Itoa(250 + rng.IntN(10))
		case 3:
			return strconv.Itoa(rng.IntN(10000))
		}
		return strconv.Itoa(rng.IntN(256))
	}
	seps := []string{".", ".", ".", ".", ".", ".", "", ":", "..", "\x00"}
	tails := []string{"", "", ":1234", ":0", ":", "::1", ":12:34", "\x00", ":" + strings.Repeat("9", 40), "x", ".5"}
	// Ports of every length up to 12 with a second colon at each place, or none.
	for n := range 13 {
		port := []byte(strings.Repeat("9", n))
		inputs = append(inputs, "10.1.2.3:"+string(port), "1.2.3.4:"+string(port))
		for j := range port {
			c := slices.Clone(port)
			c[j] = ':'
			inputs = append(inputs, "10.1.2.3:"+string(c), "1.2.3.4:"+string(c), "192.168.100.200:"+string(c))
		}
	}
	for range 300000 {
		var b strings.Builder
		for j := range 4 {
			if j > 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			b.WriteString(num())
		}
		b.WriteString(tails[rng.IntN(len(tails))])
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		host := hook.HostOf(s)
		a, err := netip.ParseAddr(host)
		want := err == nil && a.Is4() && a.String() == host
		got, addr, ok := canonicalIPv4Host(s)
		if ok && (!want || got != host || addr != a) {
			t.Fatalf("canonicalIPv4Host(%q) = %q, %v, %v; hostOf gives %q, netip says %v, %v", s, got, addr, ok, host, a, want)
		}
		if want && !ok && !strings.HasPrefix(s, "[") && strings.Count(s, ":") <= 1 {
			t.Fatalf("canonicalIPv4Host(%q) declined the canonical host %q", s, host)
		}
	}
	for _, s := range []string{"1.2.3.4", "1.2.3.4:80", "192.0.2.1:65535", "0.0.0.0:0", "255.255.255.255"} {
		if _, _, ok := canonicalIPv4Host(s); !ok {
			t.Errorf("canonicalIPv4Host(%q) declined a common form", s)
		}
	}
}
