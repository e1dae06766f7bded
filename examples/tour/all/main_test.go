package main

import (
	"testing"

	"github.com/reqlimit/reqlimit/examples/tour/internal/show"
)

func TestTourOnEveryFramework(t *testing.T) {
	if out, err := show.Check(apps...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
