package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// Example shares a limit of 100 requests per minute per client between every process that
// uses the same Redis. It needs a server, so it is compiled but not run.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:6379",
		// Lets the store's deadline reach the socket directly; without it the store
		// enforces the deadline itself.
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	store := redisstore.New(client, redisstore.WithPrefix("myapp:"), redisstore.WithTimeout(50*time.Millisecond))

	policy, err := core.ParsePolicy("100/1m")
	if err != nil {
		panic(err) // a policy from configuration would be checked at startup
	}
	d, err := store.Decide(context.Background(), core.Query{Policy: policy, Scope: "GET /user/{id}", Key: "192.0.2.1"})
	if err != nil {
		// Redis did not answer in time: apply your failure policy (open, closed, local).
		fmt.Println("rate limiter unavailable:", err)
		return
	}
	if !d.Allowed {
		fmt.Printf("429, retry after %v\n", d.RetryAfter)
		return
	}
	fmt.Printf("admitted, %d of %d left\n", d.Remaining, d.Rate.Count)
}
