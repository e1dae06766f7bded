package core_test

import (
	"fmt"
	"testing"

	"github.com/reqlimit/reqlimit/core"
)

// The memory store tells keys apart by a seeded hash of scope and key: every IPv4 address
// of a /16 gets a hash of its own, in every scope, and the addresses spread evenly over
// the store's shards; the same key in two scopes, or in two stores, hashes apart.
func TestKeysHashApartAndSpreadOverShards(t *testing.T) {
	m := core.NewMemoryStore(nil)
	seen := map[uint64]string{}
	var shards [64]int // the store picks a key's shard by its hash's top six bits
	for _, scope := range []string{"", "GET /user/{id}", "GET /user/{id}\x00tier gold"} {
		for x := range 256 {
			for y := range 256 {
				k := fmt.Sprintf("10.0.%d.%d", x, y)
				h := m.Hash(scope, k)
				if prev, ok := seen[h]; ok {
					t.Fatalf("%q in scope %q shares the hash %#x with %s", k, scope, h, prev)
				}
				seen[h] = fmt.Sprintf("%q in scope %q", k, scope)
				if scope == "" {
					shards[h>>58]++
				}
			}
		}
	}
	for i, n := range shards { // 1024 expected each, give or take 32
		if n < 1024-8*32 || n > 1024+8*32 {
			t.Fatalf("shard %d holds %d of a /16's 65536 addresses, not about 1024: %v", i, n, shards)
		}
	}
	other := core.NewMemoryStore(nil)
	same := 0
	for _, k := range []string{"192.0.2.1", "10.0.0.1", "a", "", "0123456789abcdef"} {
		if other.Hash("s", k) == m.Hash("s", k) {
			same++
		}
	}
	if same > 1 {
		t.Fatalf("%d of 5 keys hash alike in two stores: the hash is not seeded", same)
	}
}
