package ginlimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Review: options that cannot take effect are accepted without a word. The README says
// "Bad arguments panic at registration with a message naming the value"; nethttp.WithMux(nil)
// is refused, grpclimit refuses core.WithClientIPFromFramework, yet these are silently
// ignored by ginlimit:
//   - another adapter's option (nethttp.WithMux, nethttp.WithDenyHandler): the custom
//     refusal is never used, the pattern function never called;
//   - core.WithForwardedHeader without core.WithTrustedProxies: no header is ever read.
func TestZZOptionsThatCannotApplyAreRefused(t *testing.T) {
	cases := map[string][]core.Option{
		"nethttp.WithMux":           {nethttp.WithMux(http.NewServeMux())},
		"nethttp.WithDenyHandler":   {nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, core.Decision) {})},
		"WithForwardedHeader alone": {core.WithForwardedHeader("X-Real-IP")},
	}
	for name, opts := range cases {
		opts = append(opts, core.WithStore(core.NewMemoryStore(nil)))
		if _, err := ginlimit.New("3/1m", opts...); err == nil {
			t.Errorf("%s: accepted by ginlimit.New, though it can have no effect; want an error naming it", name)
		}
	}
	_ = time.Minute
}
