// Command tour shows reqlimit at work on net/http, in memory, with no setup: it starts a
// server on a loopback port, sends requests to a route limited to 3 per minute, and prints
// what came back. The fourth request is refused with 429 and an exact Retry-After; a fifth
// with a forged X-Forwarded-For is refused too, because forwarded headers count only from
// trusted proxies.
//
//	go run ./examples/tour       # net/http alone: quick on a cold build cache
//	go run ./examples/tour/all   # the same route on every framework reqlimit serves
package main

import (
	"fmt"
	"os"

	"github.com/reqlimit/reqlimit/examples/tour/internal/show"
)

func main() {
	if err := show.Run(os.Stdout, show.NetHTTP); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}
