package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestLoopbackForwardedChainWarningNamesTheSameHostFix: a chain header (X-Forwarded-For,
// Forwarded) from an untrusted loopback peer is a proxy on the application's own host, or
// a local client forging one. The README's checklist and docs/operations.md say that
// trusting 127.0.0.1 for such a chain lets any client that reaches the app from the host
// pick its own key, and name the safe fixes: a proxy that sets X-Real-IP, read alone, or
// a unix socket. A warning that offered only core.WithTrustedProxies("127.0.0.1") would
// lead there; it must name the same-host fixes too. A private peer (a proxy on another
// host) and a single-address header from loopback keep the plain fix.
func TestLoopbackForwardedChainWarningNamesTheSameHostFix(t *testing.T) {
	sameHost := []string{`core.WithForwardedHeader("X-Real-IP")`, `core.WithTrustedProxies("unix")`}
	for _, c := range []struct {
		peer, header, value string
		wantSameHost        bool
	}{
		{"127.0.0.1:41234", "X-Forwarded-For", "198.51.100.1", true},
		{"[::1]:41234", "X-Forwarded-For", "198.51.100.1", true},
		{"127.0.0.1:41234", "Forwarded", "for=198.51.100.1", true},
		{"127.0.0.1:41234", "X-Real-Ip", "198.51.100.1", false},
		{"10.1.2.3:41234", "X-Forwarded-For", "198.51.100.1", false},
	} {
		var log hookLog
		l := limiter(t, core.WithErrorHook(log.hook))
		l.Check(context.Background(), adapter.Input{Route: "GET /login", Peer: c.peer,
			Request: routedReq{req(c.header, c.value)}}, nil)
		errs := log.got()
		if len(errs) != 1 {
			t.Errorf("%s %s: %d warnings, want 1: %q", c.peer, c.header, len(errs), errs)
			continue
		}
		for _, fix := range sameHost {
			if got := strings.Contains(errs[0], fix); c.wantSameHost && !got {
				t.Errorf("%s %s: warning does not name %s:\n%s", c.peer, c.header, fix, errs[0])
			}
		}
		if got := strings.Contains(errs[0], sameHost[1]); !c.wantSameHost && got {
			t.Errorf("%s %s: warning names %s, which a proxy on another host or one that sets X-Real-IP does not need:\n%s", c.peer, c.header, sameHost[1], errs[0])
		}
	}
}
