package core

import (
	"errors"
	"sync"
)

var defaultStore struct {
	sync.Mutex
	store Store
	used  bool
}

// theDefaultStore returns the process-wide store that limits use when no WithStore option
// is given: an in-memory store unless SetDefaultStore replaced it.
func theDefaultStore() Store {
	defaultStore.Lock()
	defer defaultStore.Unlock()
	if defaultStore.store == nil {
		defaultStore.store = NewMemoryStore(nil)
	}
	defaultStore.used = true
	return defaultStore.store
}

// errDefaultStoreInUse is SetDefaultStore's error once a limit has taken the default store.
var errDefaultStoreInUse = errors.New("reqlimit: default store already in use: set it before registering limits")

// SetDefaultStore replaces the default MemoryStore for limits registered later. It fails
// for nil, or once a limit took the default store.
func SetDefaultStore(s Store) error {
	if s == nil {
		return errors.New("reqlimit: SetDefaultStore(nil): a store is required")
	}
	defaultStore.Lock()
	defer defaultStore.Unlock()
	if defaultStore.used {
		return errDefaultStoreInUse
	}
	defaultStore.store = s
	return nil
}
