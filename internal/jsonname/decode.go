package jsonname

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// decodePlan is how Unmarshal reads one type: encoding/json reads the
// bytes into twin, a type without JSON methods all the way down, in one
// pass; conv then copies the twin into the value, reading names back.
type decodePlan struct {
	twin reflect.Type
	conv func(dst, src reflect.Value) error
}

func decodePlanOf(t reflect.Type) (*decodePlan, error) {
	if p, ok := decodePlans.Load(t); ok {
		return p.(*decodePlan), nil
	}
	mu.Lock()
	defer mu.Unlock()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s", errNotStruct, t)
	}
	p, err := buildStruct(t, true, map[reflect.Type]bool{})
	if err != nil {
		return nil, err
	}
	decodePlans.Store(t, p)
	return p, nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// originals maps each twin to the type it stands for, so that an error
// names the type a reader knows (typeError).
var originals sync.Map // reflect.Type → reflect.Type

func newPlan(t, twin reflect.Type, conv func(dst, src reflect.Value) error) *decodePlan {
	originals.Store(twin, t)
	return &decodePlan{twin, conv}
}

// typeError names in err, encoding/json's error for a value of the wrong
// JSON type, the types the value was read for rather than their twins,
// which have no names and would be spelled out field by field.
func typeError(err error, top reflect.Type) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	out := *te
	if t, ok := originals.Load(te.Type); ok {
		out.Type = t.(reflect.Type)
	}
	if out.Struct == "" && out.Field != "" {
		out.Struct = top.Name()
	}
	return &out
}

// build returns the plan of a field's type, or nil when encoding/json
// reads it as it is: a type with no jsonname tags within, or one without
// tags of its own that reads itself (its UnmarshalJSON), or one already
// being built (a recursive type reads itself below its first level).
func build(t reflect.Type, building map[reflect.Type]bool) (*decodePlan, error) {
	if building[t] {
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return buildPointer(t, building)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, nil // []byte: base64, as encoding/json has it
		}
		return buildSlice(t, building)
	case reflect.Struct:
		if p, ok := decodePlans.Load(t); ok {
			return p.(*decodePlan), nil
		}
		return buildStruct(t, false, building)
	}
	return nil, nil
}

func buildPointer(t reflect.Type, building map[reflect.Type]bool) (*decodePlan, error) {
	e, err := build(t.Elem(), building)
	if e == nil || err != nil {
		return nil, err
	}
	conv := func(dst, src reflect.Value) error {
		if src.IsNil() {
			return nil
		}
		p := reflect.New(t.Elem())
		dst.Set(p)
		return e.conv(p.Elem(), src.Elem())
	}
	return newPlan(t, reflect.PointerTo(e.twin), conv), nil
}

func buildSlice(t reflect.Type, building map[reflect.Type]bool) (*decodePlan, error) {
	e, err := build(t.Elem(), building)
	if e == nil || err != nil {
		return nil, err
	}
	conv := func(dst, src reflect.Value) error {
		if src.IsNil() {
			return nil
		}
		n := src.Len()
		s := reflect.MakeSlice(t, n, n)
		dst.Set(s)
		for i := range n {
			if err := e.conv(s.Index(i), src.Index(i)); err != nil {
				return err
			}
		}
		return nil
	}
	return newPlan(t, reflect.SliceOf(e.twin), conv), nil
}

// decodeField copies one field of the twin into the value.
type decodeField struct {
	dst, src int
	name     string // the JSON name, for a list's errors
	b64      bool
	list     bool
	sub      *decodePlan
}

// buildStruct plans a struct; a type without jsonname tags within gets
// none unless top (the type Unmarshal was called with) is set.
func buildStruct(t reflect.Type, top bool, building map[reflect.Type]bool) (*decodePlan, error) {
	fs, opts, err := fields(t)
	if err != nil {
		return nil, err
	}
	own := false
	for _, o := range opts {
		own = own || o.b64
	}
	if !top && !own && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		return nil, nil
	}
	building[t] = true
	defer delete(building, t)
	var twin []reflect.StructField
	var dfs []decodeField
	needed := top || own
	for i, f := range fs {
		df := decodeField{dst: f.Index[0], src: len(twin), name: jsonName(f), b64: opts[i].b64, list: f.Type.Kind() == reflect.Slice}
		if df.sub, err = build(f.Type, building); err != nil {
			return nil, err
		}
		typ := f.Type
		if df.sub != nil {
			typ, needed = df.sub.twin, true
		}
		twin = append(twin, twinField(f, typ))
		if df.b64 {
			twin = append(twin, b64Field(f))
		}
		dfs = append(dfs, df)
	}
	if !needed {
		return nil, nil
	}
	return newPlan(t, reflect.StructOf(twin), structConv(dfs)), nil
}

func structConv(dfs []decodeField) func(dst, src reflect.Value) error {
	return func(dst, src reflect.Value) error {
		for i := range dfs {
			f := &dfs[i]
			if err := f.get(dst.Field(f.dst), src, f.src); err != nil {
				return err
			}
		}
		return nil
	}
}

// get sets dst from the twin's field at i (and its sibling).
func (f *decodeField) get(dst, twin reflect.Value, i int) error {
	src := twin.Field(i)
	switch {
	case f.b64 && !f.list:
		n, err := Name(src.String(), twin.Field(i+1).String())
		if err != nil {
			return err
		}
		dst.SetString(n)
	case f.b64:
		ns, err := Names(src.Interface().([]string), twin.Field(i+1).Interface().([]string))
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		dst.Set(reflect.ValueOf(ns))
	case f.sub != nil:
		return f.sub.conv(dst, src)
	default:
		dst.Set(src)
	}
	return nil
}
