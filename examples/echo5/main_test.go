package main

import (
	"testing"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) { exampletest.Check(t, exampletest.HTTP(newEcho())) }
