package core_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestPrefixListsRefusedExactlyWhenTheyHoldEveryAddress checks WithTrustedProxies and
// WithAllowList against an independent oracle, an interval merge over the addresses each
// prefix holds: a list is refused exactly when, prefix by prefix across the options,
// it comes to hold every address a client can be matched as in one family, and the
// error names the prefix that completed it. Clients are matched unmapped, so for IPv6
// the IPv4-mapped range ::ffff:0:0/96 needs no cover, and a mapped prefix spelled with
// 96 bits or more is IPv4. The lists are generated (deterministic seed): partitions of a
// family, some with a piece left out, split ever finer near the mapped range, the last
// address or a random one, with duplicates, nested and unmasked prefixes, bare addresses,
// mapped spellings, the other family mixed in, shuffled and split across options, "unix"
// among the trusted.
func TestPrefixListsRefusedExactlyWhenTheyHoldEveryAddress(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 7))
	for n := range 400 {
		list := genPrefixList(rng)
		want := -1 // the index of the prefix that completes a family, if any
		var held []oracleRange
		for i, s := range list {
			held = append(held, oracleRangeOf(t, s))
			if oracleHoldsAFamily(held) {
				want = i
				break
			}
		}
		var calls [][]string
		for rest := list; len(rest) > 0; {
			k := 1 + rng.IntN(len(rest))
			if rng.IntN(2) == 0 {
				k = len(rest)
			}
			calls, rest = append(calls, rest[:k]), rest[k:]
		}
		for name, option := range map[string]func(...string) core.Option{
			"WithTrustedProxies": core.WithTrustedProxies,
			"WithAllowList":      core.WithAllowList,
		} {
			opts := []core.Option{core.WithStore(core.NewMemoryStore(nil))}
			for _, c := range calls {
				if name == "WithTrustedProxies" { // "unix" among the prefixes
					at := n % (len(c) + 1)
					c = slices.Concat(c[:at], []string{"unix"}, c[at:])
				}
				opts = append(opts, option(c...))
			}
			_, err := adapter.New(1, time.Minute, opts...)
			switch {
			case want < 0 && err != nil:
				t.Fatalf("list %d, %s %q: %v; want it accepted: an address is left out", n, name, calls, err)
			case want >= 0 && err == nil:
				t.Fatalf("list %d, %s %q: accepted; %q completes every %s address", n, name, calls, list[want], oracleRangeOf(t, list[want]).family())
			case want >= 0 && (!strings.Contains(err.Error(), name+"("+strconv.Quote(list[want])+")") ||
				!strings.Contains(err.Error(), "every "+oracleRangeOf(t, list[want]).family()+" address")):
				t.Fatalf("list %d, %s %q: %v; want the error to name %q and every %s address", n, name, calls, err, list[want], oracleRangeOf(t, list[want]).family())
			}
		}
	}
}

// oracleRange is the addresses a prefix holds, as integers, in a family of bits bits.
type oracleRange struct {
	bits       int
	first, end *big.Int // end is past the last
}

func (r oracleRange) family() string {
	if r.bits == 32 {
		return "IPv4"
	}
	return "IPv6"
}

// oracleRangeOf reads s on its own: an address or CIDR, a prefix inside ::ffff:0:0/96 of
// 96 bits or more being the IPv4 prefix it maps.
func oracleRangeOf(t *testing.T, s string) oracleRange {
	t.Helper()
	addr, bits := s, -1
	if a, b, ok := strings.Cut(s, "/"); ok {
		addr = a
		var err error
		if bits, err = strconv.Atoi(b); err != nil {
			t.Fatalf("generated %q", s)
		}
	}
	a := netip.MustParseAddr(addr)
	if bits < 0 {
		bits = a.BitLen()
	}
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	first := new(big.Int).SetBytes(a.AsSlice())
	size := new(big.Int).Lsh(big.NewInt(1), uint(a.BitLen()-bits))
	first.Sub(first, new(big.Int).Mod(first, size)) // masked
	return oracleRange{a.BitLen(), first, new(big.Int).Add(first, size)}
}

// oracleHoldsAFamily merges the ranges of each family and reports whether one family's
// merge is whole, the IPv4-mapped IPv6 range counted as held.
func oracleHoldsAFamily(held []oracleRange) bool {
	mapped := new(big.Int).Lsh(big.NewInt(0xffff), 32)
	for _, bits := range []int{32, 128} {
		rs := []oracleRange{}
		if bits == 128 {
			rs = append(rs, oracleRange{128, mapped, new(big.Int).Add(mapped, new(big.Int).Lsh(big.NewInt(1), 32))})
		}
		for _, r := range held {
			if r.bits == bits {
				rs = append(rs, r)
			}
		}
		slices.SortFunc(rs, func(a, b oracleRange) int { return a.first.Cmp(b.first) })
		next := big.NewInt(0)
		for _, r := range rs {
			if r.first.Cmp(next) > 0 {
				break
			}
			if r.end.Cmp(next) > 0 {
				next = r.end
			}
		}
		if next.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(bits))) == 0 {
			return true
		}
	}
	return false
}

// genPrefixList returns a list of prefix spellings to register.
func genPrefixList(rng *rand.Rand) []string {
	var pieces []netip.Prefix
	for range 1 + rng.IntN(2) {
		v6 := rng.IntN(2) == 0
		pieces = append(pieces, genPartition(rng, v6)...)
	}
	if len(pieces) > 0 && rng.IntN(3) > 0 {
		i := rng.IntN(len(pieces))
		pieces = slices.Delete(pieces, i, i+1) // leave a piece out
	}
	for range rng.IntN(6) { // nested or duplicate prefixes, or stray ones
		switch p := genRandomPrefix(rng); {
		case len(pieces) > 0 && rng.IntN(2) == 0:
			in := pieces[rng.IntN(len(pieces))]
			bits := in.Bits() + rng.IntN(in.Addr().BitLen()-in.Bits()+1)
			pieces = append(pieces, netip.PrefixFrom(randomIn(rng, in), bits).Masked())
		default:
			pieces = append(pieces, p)
		}
	}
	rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	var list []string
	for _, p := range pieces {
		list = append(list, spell(rng, p))
	}
	return list
}

// genPartition splits a family's space into prefixes along one path: each step halves
// the piece holding the path's address and keeps the other half whole. The path leads
// to the mapped range, the last address, the first, or a random address.
func genPartition(rng *rand.Rand, v6 bool) []netip.Prefix {
	bitLen, whole := 32, netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if v6 {
		bitLen, whole = 128, netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	target := randomIn(rng, whole)
	switch rng.IntN(4) {
	case 0:
		if v6 {
			target = randomIn(rng, netip.MustParsePrefix("::ffff:0:0/96"))
			if rng.IntN(2) == 0 {
				target = netip.MustParseAddr("::ffff:0:0")
			}
		}
	case 1:
		target = lastOf(whole)
	case 2:
		target = whole.Addr()
	}
	depth := rng.IntN(bitLen + 1)
	var out []netip.Prefix
	for bits := 0; bits < depth; bits++ {
		// The half of the piece at bits+1 bits without the target.
		half, _ := target.Prefix(bits + 1)
		other := flipBit(half.Addr(), bits)
		out = append(out, netip.PrefixFrom(other, bits+1))
	}
	last, _ := target.Prefix(depth)
	return append(out, last)
}

func genRandomPrefix(rng *rand.Rand) netip.Prefix {
	var a netip.Addr
	if rng.IntN(2) == 0 {
		a = randomIn(rng, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
	} else {
		a = randomIn(rng, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
	}
	p, _ := a.Prefix(rng.IntN(a.BitLen() + 1))
	if p.Bits() == 0 {
		p, _ = a.Prefix(a.BitLen())
	}
	return p
}

// randomIn returns a random address of p.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	r := make([]byte, len(b))
	for i := range r {
		r[i] = byte(rng.Uint32())
	}
	for i := range b {
		keep := min(8, max(0, p.Bits()-8*i)) // the byte's prefix bits
		mask := byte(0xff << (8 - keep))
		b[i] = b[i]&mask | r[i]&^mask
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		b[i] |= 0xff >> min(8, max(0, p.Bits()-8*i))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func flipBit(a netip.Addr, bit int) netip.Addr {
	b := a.AsSlice()
	b[bit/8] ^= 0x80 >> (bit % 8)
	r, _ := netip.AddrFromSlice(b)
	return r
}

// spell writes p as an option may take it: a CIDR, unmasked at times, a bare address for
// a single one, an IPv4 prefix mapped into IPv6 at times.
func spell(rng *rand.Rand, p netip.Prefix) string {
	a, bits := p.Addr(), p.Bits()
	if rng.IntN(4) == 0 {
		a = randomIn(rng, p) // host bits set: the options mask them
	}
	if a.Is4() && rng.IntN(4) == 0 {
		a, bits = netip.AddrFrom16(a.As16()), bits+96
	}
	if bits == a.BitLen() && rng.IntN(2) == 0 {
		return a.String()
	}
	if a.Is4In6() {
		return fmt.Sprintf("::ffff:%s/%d", a.Unmap(), bits)
	}
	return fmt.Sprintf("%s/%d", a, bits)
}

// TestIPv6ListLeavingOutOnlyTheMappedRangeRefused: an IPv6 address in ::ffff:0:0/96 is
// matched as the IPv4 address it maps, so IPv6 prefixes that hold every other address hold
// every IPv6 client. Trusted, each such client named itself in X-Forwarded-For; so the
// list is refused as ::/0 is.
func TestIPv6ListLeavingOutOnlyTheMappedRangeRefused(t *testing.T) {
	var list []string // the 96 prefixes beside ::ffff:0:0/96, biggest first
	mapped := netip.MustParseAddr("::ffff:0:0")
	for bits := range 96 {
		half, _ := mapped.Prefix(bits + 1)
		list = append(list, netip.PrefixFrom(flipBit(half.Addr(), bits), bits+1).String())
	}
	for name, option := range map[string]func(...string) core.Option{
		"WithTrustedProxies": core.WithTrustedProxies,
		"WithAllowList":      core.WithAllowList,
	} {
		l, err := adapter.New(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), option(list...))
		if err == nil || !strings.Contains(err.Error(), name+"("+strconv.Quote(list[95])+")") || !strings.Contains(err.Error(), "every IPv6 address") {
			t.Errorf("%s(every IPv6 prefix but ::ffff:0:0/96): registered with %v; want an error naming %q and every IPv6 address", name, err, list[95])
		}
		if err == nil && name == "WithTrustedProxies" {
			k := core.ClientKey(l, "[2001:db8:1::5]:1234", req("X-Forwarded-For", "2001:db8:2::9"))
			t.Logf("a client at 2001:db8:1::5 keyed as %q, which it wrote", k)
		}
	}
}

// TestLongPrefixListsRegisterPromptly: an allow list or trusted list of many thousand
// prefixes (a country's ranges, say), or of addresses that follow one another from the
// family's first, is checked once per option, not once per prefix against every other:
// registration takes a moment, where checking per prefix took hours.
func TestLongPrefixListsRegisterPromptly(t *testing.T) {
	const n = 20000
	var spread, chain []string
	for i := range n {
		spread = append(spread, fmt.Sprintf("%d.%d.%d.0/24", 1+i>>16&0xff, i>>8&0xff, i&0xff))
		chain = append(chain, netip.AddrFrom4([4]byte{0, byte(i >> 16), byte(i >> 8), byte(i)}).String())
	}
	// No clock is read: a check costing the list's square or cube (hours here) fails by the
	// test binary's own timeout.
	for _, list := range [][]string{spread, chain} {
		for _, option := range []func(...string) core.Option{core.WithTrustedProxies, core.WithAllowList} {
			if _, err := adapter.New(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), option(list...)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
