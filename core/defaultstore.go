package core

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
)

var defaultStore struct {
	sync.Mutex
	store Store
	used  bool
}

// theDefaultStore returns the store of limits without WithStore: a MemoryStore unless
// SetDefaultStore replaced it.
func theDefaultStore() Store {
	defaultStore.Lock()
	defer defaultStore.Unlock()
	if defaultStore.store == nil {
		defaultStore.store = NewMemoryStore(nil)
	}
	defaultStore.used = true
	return defaultStore.store
}

// SetDefaultStore replaces the default MemoryStore for limits registered later. It fails
// for nil, or once a limit took the default store.
func SetDefaultStore(s Store) error {
	if err := checkStore("SetDefaultStore", s); err != nil {
		return fmt.Errorf("reqlimit: %w", err)
	}
	defaultStore.Lock()
	defer defaultStore.Unlock()
	if defaultStore.used {
		return errors.New("reqlimit: default store already in use: set it before registering limits")
	}
	defaultStore.store = s
	return nil
}

// checkStore refuses a store that is nil, also as a nil pointer of a store type, or a
// MemoryStore not made by NewMemoryStore (without a clock), which would pass registration
// and then fail every request outside any fail mode.
func checkStore(fn string, s Store) error {
	if s == nil {
		return fmt.Errorf("%s(nil): a store is required", fn)
	}
	switch v := reflect.ValueOf(s); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice:
		if v.IsNil() {
			return fmt.Errorf("%s((%T)(nil)): the store was never created: create it (core.NewMemoryStore, redisstore.New) or leave it out for the default store", fn, s)
		}
	}
	if m, ok := s.(*MemoryStore); ok && m.now == nil {
		return fmt.Errorf("%s(%T) not made by core.NewMemoryStore: create it with core.NewMemoryStore(nil)", fn, s)
	}
	return nil
}
