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

// A store for many clients: one exact rate per key kept in 2 bytes a grant rather than 7,
// in units of at most T/13107 (2 ms for a minute), rounded so that the limit stays strict.
// Every process sharing the limits must say the same.
func ExampleWithCompact() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store := redisstore.New(client, redisstore.WithCompact(true))
	if err := core.SetDefaultStore(store); err != nil {
		panic(err) // the default store was already in use
	}
}
