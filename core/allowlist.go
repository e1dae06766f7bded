package core

import (
	"fmt"
	"net/netip"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// WithAllowList exempts, as WithSkip does, clients in one of prefixes ("10.0.0.0/8",
// "::1/128", or an address). The address is the default key's, whatever the key function:
// a forged header cannot claim it. A bad prefix fails the limit's registration.
func WithAllowList(prefixes ...string) Option {
	return func(c *config) error {
		from := len(c.allow)
		for _, s := range prefixes {
			p, ok := parsePrefix(s)
			if !ok {
				return fmt.Errorf("WithAllowList(%q): not an address or CIDR prefix; write one such as \"10.0.0.0/8\" or \"::1/128\"", s)
			}
			c.allow = append(c.allow, p)
		}
		if i := firstCover(c.allow, from); i >= 0 {
			f := family(c.allow[i].Addr())
			return fmt.Errorf("WithAllowList(%q): the list now holds every %s address, so no %s client is limited; to limit no one, leave the limit out", prefixes[i-from], f, f)
		}
		return nil
	}
}

// exempt reports whether the request's client is on the allow list. A peer without an
// address (a unix socket, a garbled peer) is limited, never exempt, unless a proxy trusted
// there forwarded an address on the list.
func (l *limiter) exempt(peer string, r Request) bool {
	addr, _ := netip.ParseAddr(hook.HostOf(peer))
	addr, _ = l.proxied(addr, r)
	return inAny(l.cfg.allow, addr)
}
