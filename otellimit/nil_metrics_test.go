package otellimit_test

import (
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/otellimit"
)

// An application whose metrics are optional may hold a nil *Metrics when they are off.
// Its Option is refused at registration, naming the fix; before, the limit registered
// and every request it decided panicked.
func TestNilMetricsOptionIsRefusedAtRegistration(t *testing.T) {
	var m *otellimit.Metrics
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panicked: %v", p)
			}
		}()
		_, err = nethttp.New("3/1m", m.Option())
	}()
	if err == nil || !strings.Contains(err.Error(), "otellimit.New") {
		t.Fatalf("the Option of a nil *otellimit.Metrics: registered with %v; want an error naming otellimit.New", err)
	}
}
