package core

import (
	"net/netip"
	"strconv"
	"testing"
)

// TestLocalIPv4ReadsTextAsNetipDoes: the forwarded-header warning's check on the text of
// an IPv4 address says what netip says of the address, for every first two bytes.
func TestLocalIPv4ReadsTextAsNetipDoes(t *testing.T) {
	for a := range 256 {
		for b := range 256 {
			for _, tail := range []string{".0.1", ".255.255"} {
				host := strconv.Itoa(a) + "." + strconv.Itoa(b) + tail
				if got, want := localIPv4(host), localAddr(netip.MustParseAddr(host)); got != want {
					t.Fatalf("localIPv4(%q) = %q, netip says %q", host, got, want)
				}
			}
		}
	}
}
