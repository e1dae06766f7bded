package hook

import "testing"

// TestRegisteredIsTheCoreOfItsTypes: Registered gives back the very Core registered, and
// asked for other types it panics, so that a mismatch between package core and package
// adapter stops the program when it starts rather than at a route's first request.
func TestRegisteredIsTheCoreOfItsTypes(t *testing.T) {
	saved := registered
	defer func() { registered = saved }()
	c := &Core[int, string]{Refuse: func(error) int { return 7 }}
	Register(c)
	if got := Registered[int, string](); got != c {
		t.Fatalf("Registered returned %p, want the registered %p", got, c)
	}
	defer func() {
		if recover() == nil {
			t.Error("Registered of other types than core's did not panic")
		}
	}()
	Registered[string, int]()
}
