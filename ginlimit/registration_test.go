package ginlimit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Options that cannot take effect are refused where the limit is registered, rather than
// ignored: another adapter's option (its deny handler would never answer, its pattern
// function never run), and a forwarded header without the proxies it is read from.
func TestOptionsThatCannotApplyAreRefused(t *testing.T) {
	for name, c := range map[string]struct {
		opt  core.Option
		want string
	}{
		"nethttp.WithMux":           {nethttp.WithMux(http.NewServeMux()), "package nethttp given to ginlimit.New"},
		"nethttp.WithDenyHandler":   {nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, core.Decision) {}), "use ginlimit's own"},
		"WithForwardedHeader alone": {core.WithForwardedHeader("X-Real-IP"), `WithForwardedHeader("X-Real-Ip") without WithTrustedProxies`},
	} {
		_, err := ginlimit.New("3/1m", c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "registration_test.go") {
			t.Errorf("%s: ginlimit.New: %v; want an error saying %q, and the line", name, err, c.want)
		}
	}
	if _, err := ginlimit.New("3/1m", ginlimit.WithDenyHandler(nil), core.WithTrustedProxies("10.0.0.0/8"), core.WithForwardedHeader("X-Real-IP")); err != nil {
		t.Errorf("ginlimit's own option and a forwarded header with its proxies: %v", err)
	}
}
