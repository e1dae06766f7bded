package main

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) {
	gin.SetMode(gin.TestMode)
	exampletest.Check(t, exampletest.HTTP(newRouter()), issue)
}

// Failed logins count, 5 per 15 minutes; successful ones do not.
func TestLogin(t *testing.T) {
	gin.SetMode(gin.TestMode)
	exampletest.CheckLoginHTTP(t, newRouter(), password)
}

// issue adds token to the tokens the application issued.
func issue(token, plan string) { issued[token] = plan }

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }
