package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// WithPartitionKey adds pk to RateLimit-Policy members; with legacy fields only, or none,
// there is no such member, and the option would do nothing. Like other options that
// cannot take effect (WithForwardedHeader without WithTrustedProxies, another adapter's
// option), it is refused at registration, naming the style and the fix.
func TestPartitionKeyWithoutStandardFieldsIsRefused(t *testing.T) {
	for _, style := range []core.HeaderStyle{core.HeadersLegacy, core.HeadersOff} {
		_, err := adapter.New(3, time.Minute, core.WithHeaders(style),
			core.WithPartitionKey("0123456789abcdef0123456789abcdef"))
		if err == nil || !strings.Contains(err.Error(), "WithPartitionKey") || !strings.Contains(err.Error(), "HeadersStandard") {
			t.Errorf("WithPartitionKey with WithHeaders(%d), which sends no RateLimit-Policy: error %v, want one naming the option and the fix", style, err)
		}
	}
}
