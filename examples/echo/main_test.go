package main

import (
	"testing"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) { exampletest.Check(t, exampletest.HTTP(newEcho())) }

// Failed logins count, 5 per 15 minutes; successful ones do not.
func TestLogin(t *testing.T) {
	exampletest.CheckLoginHTTP(t, newEcho(), password)
}
