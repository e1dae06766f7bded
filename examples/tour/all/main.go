// Command all runs the tour on every framework reqlimit serves: net/http, Gin, Echo v4 and
// v5, Fiber v2 and v3. It compiles all six frameworks, so its first run takes a while;
// `go run ./examples/tour` shows the same on net/http alone.
//
//	go run ./examples/tour/all
package main

import (
	"fmt"
	"os"

	"net"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	echolimit5 "github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/examples/tour/internal/show"
	"github.com/reqlimit/reqlimit/fiberlimit"
	fiberlimit3 "github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// apps lists the tour's stops, in order.
var apps = []show.App{
	show.NetHTTP,
	{Name: "Gin", Serve: serveGin},
	{Name: "Echo v4", Serve: serveEcho},
	{Name: "Echo v5", Serve: serveEcho5},
	{Name: "Fiber v2", Serve: serveFiber},
	{Name: "Fiber v3", Serve: serveFiber3},
}

func main() {
	if err := show.Run(os.Stdout, apps...); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

// Each demo gets its own store, so that the adapters' counts do not mix.

func serveGin(ln net.Listener) func() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/user/test", ginlimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil))),
		func(c *gin.Context) { c.String(200, "hello") })
	return show.ServeHTTP(ln, r)
}

func serveEcho(ln net.Listener) func() {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/user/test", func(c echo.Context) error { return c.String(200, "hello") },
		echolimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil))))
	return show.ServeHTTP(ln, e)
}

func serveEcho5(ln net.Listener) func() {
	e := echo5.New()
	e.GET("/user/test", func(c *echo5.Context) error { return c.String(200, "hello") },
		echolimit5.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil))))
	return show.ServeHTTP(ln, e)
}

func serveFiber(ln net.Listener) func() {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/user/test", fiberlimit.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil))),
		func(c *fiber.Ctx) error { return c.SendString("hello") })
	go app.Listener(ln)
	return func() { app.Shutdown() }
}

func serveFiber3(ln net.Listener) func() {
	app := fiber3.New()
	app.Get("/user/test", fiberlimit3.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil))),
		func(c fiber3.Ctx) error { return c.SendString("hello") })
	go app.Listener(ln, fiber3.ListenConfig{DisableStartupMessage: true})
	return func() { app.Shutdown() }
}
