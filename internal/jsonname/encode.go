package jsonname

import (
	"fmt"
	"reflect"
)

// encodePlan is how Marshal writes one struct type: through a twin type
// with the same fields (nested values keep their own types, and with them
// their own MarshalJSON), name fields doubled by their _b64 siblings and
// derived fields added.
type encodePlan struct {
	twin   reflect.Type
	fields []encodeField
}

// encodeField copies one field of the value into the twin.
type encodeField struct {
	src, dst int
	opts     options
	method   int // the then: method's index in the type's method set
	then     int // the derived field's index in the twin
}

func encodePlanOf(t reflect.Type) (*encodePlan, error) {
	if p, ok := encodePlans.Load(t); ok {
		return p.(*encodePlan), nil
	}
	mu.Lock()
	defer mu.Unlock()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s", errNotStruct, t)
	}
	fs, opts, err := fields(t)
	if err != nil {
		return nil, err
	}
	p := &encodePlan{}
	var twin []reflect.StructField
	for i, f := range fs {
		ef := encodeField{src: f.Index[0], dst: len(twin), opts: opts[i], method: -1}
		twin = append(twin, twinField(f, f.Type))
		if ef.opts.b64 {
			twin = append(twin, b64Field(f))
		}
		if o := ef.opts; o.thenMethod != "" {
			m, ok := t.MethodByName(o.thenMethod)
			if !ok || m.Type.NumIn() != 1 || m.Type.NumOut() != 1 {
				return nil, fmt.Errorf("jsonname: %s.%s: then: %s is no method without arguments and with one result", t, f.Name, o.thenMethod)
			}
			ef.method, ef.then = m.Index, len(twin)
			twin = append(twin, reflect.StructField{Name: "Then_" + f.Name, Type: m.Type.Out(0), Tag: reflect.StructTag(`json:"` + o.thenName + `"`)})
		}
		p.fields = append(p.fields, ef)
	}
	p.twin = reflect.StructOf(twin)
	encodePlans.Store(t, p)
	return p, nil
}

// put writes the field of v into twin.
func (f *encodeField) put(twin, v reflect.Value) {
	src, dst := v.Field(f.src), twin.Field(f.dst)
	switch {
	case f.opts.b64 && src.Kind() == reflect.String:
		dst.SetString(Text(src.String()))
		twin.Field(f.dst + 1).SetString(B64(src.String()))
	case f.opts.b64:
		names := src.Interface().([]string)
		dst.Set(reflect.ValueOf(Texts(names)))
		twin.Field(f.dst + 1).Set(reflect.ValueOf(B64s(names)))
	case f.opts.nonNil && src.IsNil():
		dst.Set(reflect.MakeSlice(src.Type(), 0, 0))
	default:
		dst.Set(src)
	}
	if f.method >= 0 {
		twin.Field(f.then).Set(v.Method(f.method).Call(nil)[0])
	}
}
