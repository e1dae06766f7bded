package core

import (
	"errors"
	"fmt"
	"reflect"
)

// KeyByValue keys requests by the value stored under key (Request.Value): a string, a
// Stringer's text, or fmt's text of a value that prints alike in every request. One that
// does not (it holds a pointer) is the key function's error, and the request is keyed by
// IP; so is every request under KeyByValue(nil), as under KeyByHeader("").
func KeyByValue(key any) KeyFunc {
	if key == nil {
		err := errors.New("KeyByValue(nil): a key is required, the one your code stores the value under")
		return func(Request) (string, error) { return "", err }
	}
	return func(r Request) (string, error) {
		v := r.Value(key)
		if rv := reflect.ValueOf(v); v == nil || rv.Kind() == reflect.Pointer && rv.IsNil() {
			return "", nil // nothing stored, or a nil pointer: no value
		}
		switch v := v.(type) {
		case string:
			return v, nil
		case fmt.Stringer:
			return stringOf(key, v)
		}
		if !printsAlike(reflect.ValueOf(v), true, 0) {
			return "", fmt.Errorf("KeyByValue(%v): a %T prints differently in each request (it holds a pointer, a function or a channel): store a string, a number or a fmt.Stringer", key, v)
		}
		return fmt.Sprint(v), nil
	}
}

// printsAlike reports whether fmt prints v the same in every request that stores an equal
// value, so that its text can be a key. A pointer prints as its address, unless it is the
// value itself pointing at a struct, array, slice or map (fmt prints &{...}); so do
// functions, channels and unsafe pointers. A value with a String or Error method that fmt
// can call prints as it says. Deep or long values are refused rather than walked.
func printsAlike(v reflect.Value, top bool, depth int) bool {
	if !v.IsValid() {
		return true // a nil interface: <nil>
	}
	t := v.Type()
	switch {
	case depth > 16:
		return false
	case plain(v.Kind()), !top && v.CanInterface() && (t.Implements(stringerType) || t.Implements(errorType)):
		return true
	}
	all := func(n int, at func(int) reflect.Value) bool {
		for i := range n {
			if !printsAlike(at(i), false, depth+1) {
				return false
			}
		}
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		switch t.Elem().Kind() {
		case reflect.Struct, reflect.Array, reflect.Slice, reflect.Map:
			return v.IsNil() || top && printsAlike(v.Elem(), false, depth+1)
		}
		return v.IsNil()
	case reflect.Interface:
		return printsAlike(v.Elem(), false, depth+1)
	case reflect.Array, reflect.Slice: // of bytes, numbers or strings: however many
		return plain(t.Elem().Kind()) || v.Len() <= 64 && all(v.Len(), v.Index)
	case reflect.Struct:
		return all(v.NumField(), v.Field)
	case reflect.Map:
		plainMap := plain(t.Key().Kind()) && plain(t.Elem().Kind()) // printed in key order: however many
		if !plainMap && v.Len() > 64 {
			return false
		}
		for it := v.MapRange(); it.Next(); {
			if k := it.Key(); k.CanFloat() && k.Float() != k.Float() {
				return false // NaN keys cannot be sorted: printed in a random order
			}
			if !plainMap && !(printsAlike(it.Key(), false, depth+1) && printsAlike(it.Value(), false, depth+1)) {
				return false
			}
		}
		return true
	}
	return false // functions, channels, unsafe pointers, uintptrs
}

// stringOf returns v.String() for KeyByValue(key); a String method that panics is the key
// function's error, not a crashed request.
func stringOf(key any, v fmt.Stringer) (s string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("KeyByValue(%v): the String method of a %T panicked: %v", key, v, p)
		}
	}()
	return v.String(), nil
}

// plain reports whether a value of kind k prints as its contents: a bool, a number (a
// uintptr is an address) or a string.
func plain(k reflect.Kind) bool {
	return reflect.Bool <= k && k <= reflect.Complex128 && k != reflect.Uintptr || k == reflect.String
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)
