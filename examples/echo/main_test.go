package main

import (
	"testing"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) { exampletest.Check(t, exampletest.HTTP(newEcho()), issue) }

// Failed logins count, 5 per 15 minutes; successful ones do not.
func TestLogin(t *testing.T) {
	exampletest.CheckLoginHTTP(t, newEcho(), password)
}

// issue adds token to the tokens the application issued.
func issue(token, plan string) { issued[token] = plan }

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }
