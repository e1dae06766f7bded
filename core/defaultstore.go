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

// ErrDefaultStoreInUse is returned by SetDefaultStore once a limit has taken the default
// store: replacing it then would split the process's limits over two stores.
var ErrDefaultStoreInUse = errors.New("reqlimit: the default store is already in use; set it at startup, before registering limits")

// SetDefaultStore replaces the process-wide default store, for example with a Redis store.
// Call it once at startup, before any limit is registered.
func SetDefaultStore(s Store) error {
	if s == nil {
		return errors.New("reqlimit: SetDefaultStore(nil): a store is required")
	}
	defaultStore.Lock()
	defer defaultStore.Unlock()
	if defaultStore.used {
		return ErrDefaultStoreInUse
	}
	defaultStore.store = s
	return nil
}
