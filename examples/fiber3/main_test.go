package main

import (
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) {
	exampletest.Check(t, exampletest.Fasthttp(newApp().Handler()), issue)
}

// Failed logins count, 5 per 15 minutes; successful ones do not.
func TestLogin(t *testing.T) {
	exampletest.CheckLoginFasthttp(t, newApp().Handler(), password)
}

// issue adds token to the tokens the application issued.
func issue(token, plan string) { issued[token] = plan }

// The app bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) {
	c := newApp().Config()
	exampletest.CheckTimeouts(t, map[string]time.Duration{"ReadTimeout": c.ReadTimeout, "WriteTimeout": c.WriteTimeout, "IdleTimeout": c.IdleTimeout})
}

// A handler's panic answers 500 and leaves the process running: fasthttp does not recover.
func TestPanicDoesNotEndTheProcess(t *testing.T) {
	app := newApp()
	app.Get("/panic", func(fiber.Ctx) error { panic("a bug") })
	var req fasthttp.Request
	req.SetRequestURI("/panic")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 9), Port: 1}, nil)
	app.Handler()(&ctx)
	if code := ctx.Response.StatusCode(); code != 500 {
		t.Errorf("a panicking handler: status %d, want 500", code)
	}
}
