package core

import (
	"fmt"
	"reflect"
)

// printsAlike reports whether fmt prints v the same in every request that stores an equal
// value, so that its text can be a key. A pointer prints as its address, unless it is the
// value itself pointing at a struct, array, slice or map (fmt prints &{...}); so do
// functions, channels and unsafe pointers. A value with a String or Error method that fmt
// can call prints as it says. Deep or long values are refused rather than walked.
func printsAlike(v reflect.Value, top bool, depth int) bool {
	if !v.IsValid() {
		return true // a nil interface: <nil>
	}
	if depth > 16 {
		return false
	}
	if !top && v.CanInterface() && (v.Type().Implements(stringerType) || v.Type().Implements(errorType)) {
		return true
	}
	if plain(v.Kind()) {
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		switch v.Elem().Kind() {
		case reflect.Struct, reflect.Array, reflect.Slice, reflect.Map:
			return top && printsAlike(v.Elem(), false, depth+1)
		}
		return false
	case reflect.Interface:
		return printsAlike(v.Elem(), false, depth+1)
	case reflect.Array, reflect.Slice:
		if plain(v.Type().Elem().Kind()) {
			return true // bytes, numbers, strings: however many
		}
		if v.Len() > 64 {
			return false
		}
		for i := range v.Len() {
			if !printsAlike(v.Index(i), false, depth+1) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range v.NumField() {
			if !printsAlike(v.Field(i), false, depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		if k := v.Type().Key().Kind(); k == reflect.Float32 || k == reflect.Float64 {
			for it := v.MapRange(); it.Next(); {
				if f := it.Key().Float(); f != f {
					return false // NaN keys cannot be sorted: printed in a random order
				}
			}
		}
		if plain(v.Type().Key().Kind()) && plain(v.Type().Elem().Kind()) {
			return true // printed in key order: however many
		}
		if v.Len() > 64 {
			return false
		}
		for it := v.MapRange(); it.Next(); {
			if !printsAlike(it.Key(), false, depth+1) || !printsAlike(it.Value(), false, depth+1) {
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

// plain reports whether a value of kind k prints as its contents.
func plain(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	}
	return false
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)
