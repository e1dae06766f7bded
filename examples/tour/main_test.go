package main

import (
	"testing"

	"github.com/reqlimit/reqlimit/examples/tour/internal/show"
)

func TestTourOnNetHTTP(t *testing.T) {
	if out, err := show.Check(show.NetHTTP); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
