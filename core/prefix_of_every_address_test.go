package core_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// A prefix of every address turns the limit off for every client of its family: trusted
// as proxies, every hop is one, so each client names itself in X-Forwarded-For and gets
// a new bucket per request; on the allow list, every client is exempt. Either is refused
// at registration, naming the value.
func TestPrefixOfEveryAddressRefused(t *testing.T) {
	for _, every := range []string{"0.0.0.0/0", "::/0", "::ffff:0.0.0.0/96", "10.1.2.3/0"} {
		for name, opt := range map[string]core.Option{
			"WithTrustedProxies": core.WithTrustedProxies("10.0.0.0/8", every),
			"WithAllowList":      core.WithAllowList(every),
		} {
			_, err := adapter.New(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), opt)
			if err == nil || !strings.Contains(err.Error(), strconv.Quote(every)) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s(%q): registered with %v; want an error naming the option and the prefix", name, every, err)
			}
		}
	}
	// Before: a client at a public address named itself in X-Forwarded-For.
	l, err := adapter.New(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithTrustedProxies("0.0.0.0/0"))
	if err == nil {
		if k := core.ClientKey(l, "203.0.113.5:1234", req("X-Forwarded-For", "198.51.100.1")); k != "203.0.113.5" {
			t.Errorf("WithTrustedProxies(\"0.0.0.0/0\"): a client at 203.0.113.5 keyed as %q, which it wrote", k)
		}
	}
}
