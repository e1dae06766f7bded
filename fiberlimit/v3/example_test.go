package fiberlimit_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/fiberlimit/v3"
)

func Example() {
	app := fiber.New()
	app.Get("/user/:id", fiberlimit.Limit(3, time.Minute, fresh()), func(c fiber.Ctx) error { return c.SendString("ok") })

	for i := 1; i <= 4; i++ {
		// Timeout 0 waits for the handler however long it takes.
		resp, err := app.Test(httptest.NewRequest("GET", fmt.Sprintf("/user/%d", i), nil), fiber.TestConfig{Timeout: 0})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "3/1m";r=2;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "3/1m";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "3/1m";r=0;t=60 Retry-After: "60"
}

func ExampleWithDenyHandler() {
	app := fiber.New()
	limit := fiberlimit.Limit(1, time.Minute, fresh(), fiberlimit.WithDenyHandler(func(c fiber.Ctx, d core.Decision) error {
		return c.Status(fiber.StatusTooManyRequests).JSON(fiber.Map{"error": "rate limited", "retry_in_seconds": d.RetryAfter.Round(time.Second).Seconds()})
	}))
	app.Get("/search", limit, func(c fiber.Ctx) error { return c.SendString("ok") })

	for range 2 {
		resp, err := app.Test(httptest.NewRequest("GET", "/search", nil), fiber.TestConfig{Timeout: 0})
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 ok
	// 429 {"error":"rate limited","retry_in_seconds":60}
}

func ExampleNew() {
	app := fiber.New()
	limit, err := fiberlimit.New("2/1m, 10/1h", fresh()) // as read from configuration
	if err != nil {
		panic(err)
	}
	app.Get("/search", limit, func(c fiber.Ctx) error { return c.SendString("ok") })

	for range 3 {
		resp, err := app.Test(httptest.NewRequest("GET", "/search", nil), fiber.TestConfig{Timeout: 0})
		if err != nil {
			panic(err)
		}
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	// Output:
	// 200 "2/1m";q=2;w=60, "10/1h";q=10;w=3600
	// 200 "2/1m";q=2;w=60, "10/1h";q=10;w=3600
	// 429 "2/1m";q=2;w=60, "10/1h";q=10;w=3600
}

// fresh gives each example a store of its own, so that it starts empty every time it runs,
// on a clock that stands still, so that the waits it prints (t=60) do not shrink on a
// machine that stalls between requests; applications normally share the process-wide
// default store, on the real clock.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}
