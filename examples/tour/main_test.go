package main

import (
	"strings"
	"testing"
)

func TestTour(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{`"3/1m";r=0;t=60`, "429", "Too Many Requests", "forged X-Forwarded-For", "net/http on", "Gin on", "Echo v4 on", "Echo v5 on", "Fiber v2 on", "Fiber v3 on"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("tour output lacks %q:\n%s", want, out.String())
		}
	}
}
