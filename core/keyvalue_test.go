package core_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// valueRequest is a request carrying one stored value, made anew for each request by
// value, as a framework's context holds what an earlier handler stored.
type valueRequest struct {
	fakeRequest
	value func() any
}

func (r valueRequest) Value(any) any { return r.value() }

type user struct {
	ID    int
	Name  string
	Since time.Time // holds a *time.Location, printed through its String method
	Boss  *user     // nil: printed as <nil>
}

// TestKeyByValueOfAPointerFallsBackToTheAddress: a value stored as a pointer to a number
// (Gin's c.Set("uid", &id)), or holding one deeper, prints as its address, new in each
// request: every request got a bucket of its own and the limit let everything through.
// Such a value is now an error, reported, and the request keyed by its address.
func TestKeyByValueOfAPointerFallsBackToTheAddress(t *testing.T) {
	type claims struct {
		Sub string
		UID *int // a pointer without a String method: its address
	}
	for name, value := range map[string]func() any{
		"pointer to an int":            func() any { id := 5; return &id },
		"struct holding a pointer":     func() any { id := 5; return claims{"alice", &id} },
		"pointer to a struct with one": func() any { id := 5; return &claims{"alice", &id} },
		"slice of pointers":            func() any { id := 5; return []*int{&id} },
		"map to pointers":              func() any { id := 5; return map[string]*int{"id": &id} },
		"function":                     func() any { id := 5; return func() int { return id } },
		"channel":                      func() any { return make(chan int) },
		"pointer to a pointer":         func() any { u := &user{ID: 5}; return &u },
		"interface holding a pointer":  func() any { id := 5; return []any{&id} },
		"struct twelve deep":           func() any { return deep(12) },
	} {
		t.Run(name, func(t *testing.T) {
			var reported []error
			l := adapter.Must(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByValue("uid")),
				core.WithErrorHook(func(_ context.Context, err error) { reported = append(reported, err) }))
			in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1", Request: valueRequest{value: value}}
			admitted := 0
			for range 5 {
				if l.Check(context.Background(), in, nil).Allowed {
					admitted++
				}
			}
			if admitted != 3 {
				t.Errorf("%d of 5 requests admitted by 3/1m, keyed by a value that prints differently each time; want 3, keyed by the address", admitted)
			}
			if len(reported) == 0 || !strings.Contains(reported[0].Error(), "prints differently") {
				t.Errorf("error hook heard %v, want the value named", reported)
			}
		})
	}
}

// deep returns a value nested n structs deep.
func deep(n int) any {
	type box struct{ V any }
	var v any = 1
	for range n {
		v = box{v}
	}
	return v
}

// TestKeyByValueKeepsValuesThatPrintAlike: values that print the same in every request
// that stores an equal one (numbers, structs of them, a pointer to such a struct, byte
// slices of any length, maps, a time through its String method, a pointer field that has
// one too) still key the request.
func TestKeyByValueKeepsValuesThatPrintAlike(t *testing.T) {
	long := strings.Repeat("k", 100)
	for name, value := range map[string]func(who int) any{
		"int":                 func(who int) any { return who },
		"struct":              func(who int) any { return user{ID: who, Name: "x", Since: time.Unix(0, 0)} },
		"pointer to a struct": func(who int) any { return &user{ID: who, Name: "x", Since: time.Unix(0, 0)} },
		"long byte slice":     func(who int) any { return []byte(long + string(rune('a'+who))) },
		"map":                 func(who int) any { return map[string]int{"id": who} },
		"pointer field with a String method": func(who int) any {
			t := time.Unix(int64(who), 0)
			return struct{ At *time.Time }{&t}
		},
		"array of strings":           func(who int) any { return [2]string{"id", string(rune('a' + who))} },
		"error":                      func(who int) any { return errors.New(string(rune('a' + who))) },
		"slice of structs":           func(who int) any { return []user{{ID: who}} },
		"interface holding a struct": func(who int) any { return []any{user{ID: who}} },
		"struct six deep":            func(int) any { return deep(6) },
	} {
		t.Run(name, func(t *testing.T) {
			var reported []error
			l := adapter.Must(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByValue("uid")),
				core.WithErrorHook(func(_ context.Context, err error) { reported = append(reported, err) }))
			admitted := map[int]int{}
			for range 3 {
				for who := range 2 {
					in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1", Request: valueRequest{value: func() any { return value(who) }}}
					if l.Check(context.Background(), in, nil).Allowed {
						admitted[who]++
					}
				}
			}
			want := map[int]int{0: 2, 1: 2}
			if name == "struct six deep" {
				want = map[int]int{0: 1, 1: 1} // both store the same value: one key, two requests
			}
			if len(reported) > 0 || admitted[0] != want[0] || admitted[1] != want[1] {
				t.Errorf("admitted %v of 3 requests each by 2/1m, errors %v; want %v, each value its own key", admitted, reported, want)
			}
		})
	}
}

// TestKeyByValueKeepsALargeMapOfStrings: a map of strings prints alike however many
// entries it has (fmt sorts a map's keys), as a slice of strings does; one of 65 was
// refused as holding a pointer, and the request keyed by IP.
func TestKeyByValueKeepsALargeMapOfStrings(t *testing.T) {
	m := map[string]string{}
	for i := range 65 {
		m["claim"+strconv.Itoa(i)] = "v"
	}
	k, err := core.KeyByValue("claims")(valueRequest{value: func() any { return m }})
	if err != nil || k == "" {
		t.Errorf("a map[string]string of 65 entries: key %q, error %v; want its fmt text as the key", k, err)
	}
}

type panickyName struct{ Name string }

func (u panickyName) String() string { return u.Name }

type brokenStringer struct{}

func (brokenStringer) String() string { panic("no name") }

// TestKeyByValueOfANilStringerPointerDoesNotPanic: a nil pointer of a type whose String
// method has a value receiver (a typed nil an authentication middleware stores for an
// anonymous user) panicked inside the key function, crashing the request: it is no
// value, as nil is, and a String method that panics is the key function's error.
func TestKeyByValueOfANilStringerPointerDoesNotPanic(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("KeyByValue panicked: %v", r)
		}
	}()
	if k, err := core.KeyByValue("user")(valueRequest{value: func() any { return (*panickyName)(nil) }}); k != "" || err != nil {
		t.Errorf("a nil *panickyName: key %q, error %v; want none, as for no value", k, err)
	}
	if k, err := core.KeyByValue("user")(valueRequest{value: func() any { return brokenStringer{} }}); k != "" || err == nil {
		t.Errorf("a String method that panics: key %q, error %v; want the panic as the error", k, err)
	}
}

// TestKeyByValueRefusesAMapWhoseTextChangesBetweenCalls: fmt cannot sort NaN map keys, so
// such a map prints in Go's random iteration order: the same stored value named a new
// bucket on most requests. It is refused, keyed by IP.
func TestKeyByValueRefusesAMapWhoseTextChangesBetweenCalls(t *testing.T) {
	m := map[float64]int{math.NaN(): 1, math.NaN(): 2, math.NaN(): 3, math.NaN(): 4}
	if k, err := core.KeyByValue("weights")(valueRequest{value: func() any { return m }}); err == nil {
		t.Errorf("a map[float64]int with NaN keys: key %q, no error; want refused, as a value that prints differently each time", k)
	}
	ok := map[float64]int{1.5: 1, math.Inf(1): 2}
	if _, err := core.KeyByValue("weights")(valueRequest{value: func() any { return ok }}); err != nil {
		t.Errorf("a map[float64]int without NaN keys: %v, want it keyed", err)
	}
}
