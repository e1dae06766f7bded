package core_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/reqlimit/reqlimit/core"
)

// TestShortKeysHashApart: keys of up to 16 bytes, hashed in place of maphash, never share
// a hash (which would share a bucket) and spread evenly over the store's shards: every
// IPv4 address of a /16, every key of up to three bytes over a small alphabet, keys of one
// length differing in one byte anywhere, and keys that differ only in length. Two stores
// hash a key apart: the hash is seeded.
func TestShortKeysHashApart(t *testing.T) {
	m := core.NewMemoryStore(nil)
	seen := map[uint64]string{}
	add := func(k string) {
		h := m.HashKey(k)
		if prev, ok := seen[h]; ok && prev != k {
			t.Fatalf("keys %q and %q share the hash %#x", prev, k, h)
		}
		seen[h] = k
	}
	var shards [64]int // the store picks a key's shard by its hash's top six bits
	for x := range 256 {
		for y := range 256 {
			k := fmt.Sprintf("10.0.%d.%d", x, y)
			add(k)
			shards[m.HashKey(k)>>58]++
		}
	}
	for i, n := range shards { // 1024 expected each, give or take 32
		if n < 1024-8*32 || n > 1024+8*32 {
			t.Fatalf("shard %d holds %d of a /16's 65536 addresses, not about 1024: %v", i, n, shards)
		}
	}
	const alphabet = "\x00\x01a.:9\xff"
	var short func(prefix string)
	short = func(prefix string) {
		add(prefix)
		if len(prefix) < 3 {
			for i := range len(alphabet) {
				short(prefix + alphabet[i:i+1])
			}
		}
	}
	short("")
	rng := rand.New(rand.NewPCG(11, 12))
	for n := 1; n <= 20; n++ {
		base := make([]byte, n)
		for i := range base {
			base[i] = byte(rng.IntN(256))
		}
		add(string(base))
		for i := range n {
			for _, c := range []byte{base[i] ^ 1, base[i] ^ 0x80} {
				k := []byte(string(base))
				k[i] = c
				add(string(k))
			}
		}
	}
	for n := range 17 {
		add(string(make([]byte, n))) // all zero bytes: only the length tells them apart
	}
	other := core.NewMemoryStore(nil)
	same := 0
	for _, k := range []string{"192.0.2.1", "10.0.0.1", "a", "", "0123456789abcdef"} {
		if other.HashKey(k) == m.HashKey(k) {
			same++
		}
	}
	if same > 1 {
		t.Fatalf("%d of 5 keys hash alike in two stores: the hash is not seeded", same)
	}
}

// TestSameTextIsEquality: the scope comparison's short form is string equality, for texts
// that differ anywhere, in length, or not at all.
func TestSameTextIsEquality(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 200000 {
		n := rng.IntN(21)
		x := make([]byte, n)
		for i := range x {
			x[i] = "ab"[rng.IntN(2)]
		}
		y := []byte(string(x))
		switch rng.IntN(3) {
		case 0:
			if n > 0 {
				y[rng.IntN(n)] ^= 3
			}
		case 1:
			y = append(y, 'a')
		}
		if got, want := core.SameText(string(x), string(y)), string(x) == string(y); got != want {
			t.Fatalf("sameText(%q, %q) = %v, want %v", x, y, got, want)
		}
	}
}
