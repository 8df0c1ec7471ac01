package jsonname

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Marshal and Unmarshal encode a struct as encoding/json does, except for
// the fields whose tag says otherwise:
//
//	jsonname:"b64"           the field is a name (string) or a list of
//	                         names ([]string): written as Text (Texts)
//	                         under its JSON name and, right after it, as
//	                         B64 (B64s) under that name with "_b64"
//	                         appended, omitted when empty; read back with
//	                         Name (Names), whose errors a list's field
//	                         prefixes with its JSON name.
//	jsonname:"nonnil"        a nil list is written as [] (written only).
//	jsonname:"then:x=M"      right after the field, a field x holding what
//	                         the struct's method M (value receiver, no
//	                         arguments, one result) returns:
//	                         a value derived from the others (written only;
//	                         a reader ignores it).
//
// Options combine with commas. Every other exported field is written and
// read as encoding/json would, under its own tag, in the order of the
// struct, so that a field added to a type is never dropped: the type needs
// no twin that repeats its fields. Embedded fields are refused.
//
// A type uses them from its own methods:
//
//	func (s Side) MarshalJSON() ([]byte, error) { return jsonname.Marshal(s) }
//	func (s *Side) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, s) }
//
// Unmarshal reads nested structs that carry such tags (and pointers to and
// lists of them) itself, without calling their UnmarshalJSON, so that a
// record is read in one pass over its bytes however deep it nests: a type
// whose fields carry jsonname tags must therefore read through Unmarshal
// alone. A nested type without tags of its own that has an UnmarshalJSON
// is left to it.

// Marshal returns the JSON of v, a struct or a pointer to one.
func Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return []byte("null"), nil
		}
		rv = rv.Elem()
	}
	p, err := encodePlanOf(rv.Type())
	if err != nil {
		return nil, err
	}
	twin := reflect.New(p.twin).Elem()
	for i := range p.fields {
		p.fields[i].put(twin, rv)
	}
	// By value, as the hand-written encoders did: a nested value's
	// MarshalJSON with a pointer receiver is not called, as before.
	return json.Marshal(twin.Interface())
}

// Unmarshal reads data, as Marshal writes it, into v, a pointer to a
// struct, replacing what v held.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("jsonname: Unmarshal needs a pointer to a struct, not %T", v)
	}
	p, err := decodePlanOf(rv.Elem().Type())
	if err != nil {
		return err
	}
	twin := reflect.New(p.twin)
	if err := json.Unmarshal(data, twin.Interface()); err != nil {
		return typeError(err, rv.Elem().Type())
	}
	dst := rv.Elem()
	dst.SetZero()
	return p.conv(dst, twin.Elem())
}

// options are a field's jsonname tag.
type options struct {
	b64, nonNil          bool
	thenName, thenMethod string
}

func parseTag(f reflect.StructField) (options, error) {
	var o options
	tag, ok := f.Tag.Lookup("jsonname")
	if !ok {
		return o, nil
	}
	for _, opt := range strings.Split(tag, ",") {
		switch name, method, isThen := strings.Cut(strings.TrimPrefix(opt, "then:"), "="); {
		case opt == "b64":
			o.b64 = true
		case opt == "nonnil":
			o.nonNil = true
		case isThen && strings.HasPrefix(opt, "then:") && name != "" && method != "":
			o.thenName, o.thenMethod = name, method
		default:
			return o, fmt.Errorf("jsonname: field %s: unknown option %q", f.Name, opt)
		}
	}
	if o.b64 && f.Type.Kind() != reflect.String && f.Type != reflect.TypeFor[[]string]() {
		return o, fmt.Errorf("jsonname: field %s: b64 on %s (want a string or []string)", f.Name, f.Type)
	}
	if o.nonNil && f.Type.Kind() != reflect.Slice {
		return o, fmt.Errorf("jsonname: field %s: nonnil on %s (want a slice)", f.Name, f.Type)
	}
	return o, nil
}

// jsonName is the name encoding/json gives a field: its tag's, else its
// own; "-" for a field it skips.
func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}

// fields lists the struct's fields that encoding/json writes, with their
// options, refusing embedded fields.
func fields(t reflect.Type) ([]reflect.StructField, []options, error) {
	var fs []reflect.StructField
	var os []options
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, nil, fmt.Errorf("jsonname: %s: embedded field %s", t, f.Name)
		}
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		o, err := parseTag(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t, err)
		}
		fs, os = append(fs, f), append(os, o)
	}
	return fs, os, nil
}

// b64Field is the twin's sibling of a name field.
func b64Field(f reflect.StructField) reflect.StructField {
	return reflect.StructField{Name: f.Name + "_B64", Type: f.Type, Tag: reflect.StructTag(`json:"` + jsonName(f) + `_b64,omitempty"`)}
}

// twinField is a field of a twin: the field's own name, type and JSON tag.
func twinField(f reflect.StructField, t reflect.Type) reflect.StructField {
	tag := ""
	if j, ok := f.Tag.Lookup("json"); ok {
		tag = `json:"` + j + `"`
	}
	return reflect.StructField{Name: f.Name, Type: t, Tag: reflect.StructTag(tag)}
}

// plans are built once per type; builds are serialized by mu.
var (
	encodePlans sync.Map // reflect.Type → *encodePlan
	decodePlans sync.Map // reflect.Type → *decodePlan
	mu          sync.Mutex
)

// errNotStruct is returned for a value that is not a struct.
var errNotStruct = errors.New("jsonname: not a struct")
