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

// Prefixes that together hold every address of a family are refused as one prefix of
// them all is, whatever their order, spelling or number of options; the error names the
// prefix that completed the cover. Prefixes that leave an address out are accepted.
func TestPrefixesTogetherHoldingEveryAddressRefused(t *testing.T) {
	for _, c := range []struct {
		lists   [][]string // one option per list
		refused string     // the prefix the error names; "" if accepted
		family  string
	}{
		{[][]string{{"0.0.0.0/1", "128.0.0.0/1"}}, "128.0.0.0/1", "IPv4"},
		{[][]string{{"128.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"}}, "64.0.0.0/2", "IPv4"},
		{[][]string{{"0.0.0.0/1"}, {"10.0.0.0/8", "128.0.0.0/1"}}, "128.0.0.0/1", "IPv4"},
		{[][]string{{"0.0.0.0/1", "::ffff:128.0.0.0/97"}}, "::ffff:128.0.0.0/97", "IPv4"},
		{[][]string{{"8000::/1", "::/2", "4000::/2"}}, "4000::/2", "IPv6"},
		{[][]string{{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4"}}, "", ""},
		{[][]string{{"0.0.0.0/1", "::/1", "8000::/2", "c000::/2"}}, "c000::/2", "IPv6"},
		{[][]string{{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2", "255.255.255.255"}}, "192.0.0.0/2", "IPv4"},
		{[][]string{{"0.0.0.1/32", "0.0.0.2/31", "0.0.0.4/30", "0.0.0.8/29", "0.0.0.16/28", "0.0.0.32/27", "0.0.0.64/26",
			"0.0.0.128/25", "0.0.1.0/24", "0.0.2.0/23", "0.0.4.0/22", "0.0.8.0/21", "0.0.16.0/20", "0.0.32.0/19", "0.0.64.0/18",
			"0.0.128.0/17", "0.1.0.0/16", "0.2.0.0/15", "0.4.0.0/14", "0.8.0.0/13", "0.16.0.0/12", "0.32.0.0/11", "0.64.0.0/10",
			"0.128.0.0/9", "1.0.0.0/8", "2.0.0.0/7", "4.0.0.0/6", "8.0.0.0/5", "16.0.0.0/4", "32.0.0.0/3", "64.0.0.0/2",
			"128.0.0.0/1"}}, "", ""}, // all but 0.0.0.0
	} {
		for name, option := range map[string]func(...string) core.Option{
			"WithTrustedProxies": core.WithTrustedProxies,
			"WithAllowList":      core.WithAllowList,
		} {
			opts := []core.Option{core.WithStore(core.NewMemoryStore(nil))}
			for _, list := range c.lists {
				opts = append(opts, option(list...))
			}
			_, err := adapter.New(1, time.Minute, opts...)
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("%s %v: %v; want it accepted: an address is left out", name, c.lists, err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), name+"("+strconv.Quote(c.refused)+")") ||
				!strings.Contains(err.Error(), "every "+c.family+" address")):
				t.Errorf("%s %v: registered with %v; want an error naming %s(%q) and every %s address", name, c.lists, err, name, c.refused, c.family)
			}
		}
	}
}
