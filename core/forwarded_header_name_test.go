package core_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestForwardedHeaderNameMustBeAFieldName: a name no request can carry ("X Real IP", a
// name with a colon or a line break) would never be found, so every request would be
// keyed by the proxy without a word: the limit refuses it, naming the value. Real names,
// custom ones included, stay accepted.
func TestForwardedHeaderNameMustBeAFieldName(t *testing.T) {
	proxies := core.WithTrustedProxies("10.0.0.0/8")
	for _, bad := range []string{"X Real IP", "X-Real-IP:", "X-Real-IP\r\nX", "X-Réal-IP", "(X-Real-IP)"} {
		_, err := adapter.New(3, time.Minute, proxies, core.WithForwardedHeader(bad))
		if err == nil {
			t.Errorf("WithForwardedHeader(%q): accepted, want an error", bad)
			continue
		}
		if !strings.Contains(err.Error(), "WithForwardedHeader(") || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("WithForwardedHeader(%q): %q, want it to name the option and the value", bad, err)
		}
	}
	for _, ok := range []string{"X-Real-IP", "x-real-ip", " CF-Connecting-IP ", "Forwarded", "X-Forwarded-For", "Fly-Client-IP", "True-Client-IP"} {
		if _, err := adapter.New(3, time.Minute, proxies, core.WithForwardedHeader(ok)); err != nil {
			t.Errorf("WithForwardedHeader(%q): %v", ok, err)
		}
	}
}
