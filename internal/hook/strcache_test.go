package hook

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestStringCacheKeepsKeysApart: entries that share a slot (found by searching, since the
// slots are seeded per process) each get their own string: IPv4 addresses (which differ in
// their low word only), IPv6 prefixes (in their high word only), and IPv4 0.0.0.0 beside
// IPv6 :: of the same bits (in their family only).
func TestStringCacheKeepsKeysApart(t *testing.T) {
	type key struct {
		a    netip.Addr
		bits int
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// sharing returns two keys that gen made and the cache puts in one slot.
	sharing := func(gen func() key) [2]key {
		seen := map[uint64]key{}
		for range 1_000_000 {
			k := gen()
			s := slotOf(k.a, k.bits)
			if other, ok := seen[s]; ok && other != k {
				return [2]key{other, k}
			}
			seen[s] = k
		}
		t.Fatal("no two keys share a slot in a million: the hash uses fewer slots than it has")
		return [2]key{}
	}
	v4 := func() key {
		return key{netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}), 32}
	}
	prefix64 := func() key {
		var b [16]byte
		for i := range 8 {
			b[i] = byte(rng.Uint32())
		}
		return key{netip.AddrFrom16(b), 64}
	}
	pairs := [][2]key{
		sharing(v4), sharing(v4),
		sharing(prefix64), sharing(prefix64),
		{{netip.IPv4Unspecified(), 32}, {netip.IPv6Unspecified(), 32}},
	}
	format := func(a netip.Addr, bits int) string { return fmt.Sprintf("%v/%d", a, bits) }
	for _, p := range pairs {
		var c StringCache
		for range 3 {
			for _, k := range p {
				if got, want := c.Get(k.a, k.bits, format), format(k.a, k.bits); got != want {
					t.Fatalf("%v/%d (sharing its slot with %v): %q, want %q", k.a, k.bits, p, got, want)
				}
			}
		}
	}
}
