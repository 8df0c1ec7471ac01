package jsonname

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type side struct {
	Type   string `json:"type"`
	Target string `json:"target,omitempty" jsonname:"b64"`
}

var sideReads int

func (s side) MarshalJSON() ([]byte, error) { return Marshal(s) }
func (s *side) UnmarshalJSON(data []byte) error {
	sideReads++
	return Unmarshal(data, s)
}

type kind string

// Upper is derived from the record's kind.
func (r record) Upper() string { return strings.ToUpper(string(r.Kind)) }

type record struct {
	Seq     int       `json:"seq"`
	Path    string    `json:"path" jsonname:"b64"`
	Kind    kind      `json:"kind" jsonname:"then:class=Upper"`
	Argv    []string  `json:"argv" jsonname:"b64"`
	Opt     []string  `json:"opt,omitempty" jsonname:"b64"`
	Created time.Time `json:"created"`
	Sides   []side    `json:"sides" jsonname:"nonnil"`
	Before  *side     `json:"before"`
	Nested  *struct {
		Inner []*side `json:"inner"`
	} `json:"nested,omitempty"`
	Raw     []byte `json:"raw,omitempty"`
	Untaged string
	Skip    string `json:"-"`
	hidden  int
}

func (r record) MarshalJSON() ([]byte, error) { return Marshal(r) }
func (r *record) UnmarshalJSON(data []byte) error {
	return Unmarshal(data, r)
}

func TestMarshalWritesSiblings(t *testing.T) {
	r := record{Seq: 1, Path: "a\xff", Kind: "edit", Argv: []string{"x", "\xfe"}, Before: &side{Target: "\xff"}, Untaged: "u", Skip: "s", hidden: 3}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":1,"path":"\"a\\377\"","path_b64":"Yf8=","kind":"edit","class":"EDIT","argv":["x","\"\\376\""],"argv_b64":["eA==","/g=="],` +
		`"created":"0001-01-01T00:00:00Z","sides":[],"before":{"type":"","target":"\"\\377\"","target_b64":"/w=="},"Untaged":"u"}`
	if string(data) != want {
		t.Fatalf("got  %s\nwant %s", data, want)
	}
}

// Every exported field that encoding/json would write survives a round
// trip, tagged or not: a field added to a type is never dropped.
func TestRoundTripKeepsEveryField(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := record{Seq: 7, Path: "p\n\xff", Kind: "k", Argv: []string{"\xff", "b"}, Opt: []string{"o"}, Created: now,
		Sides: []side{{"file", "t\xfe"}}, Before: &side{"symlink", "x"}, Raw: []byte{0, 0xff}, Untaged: "u\xff"[:1]}
	in.Nested = &struct {
		Inner []*side `json:"inner"`
	}{Inner: []*side{{"a", "\xff"}, nil}}
	v := reflect.ValueOf(in)
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" && v.Field(i).IsZero() {
			t.Fatalf("field %s is zero in the test value: the round trip would not prove it kept", f.Name)
		}
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	sideReads = 0
	var out record
	out.hidden = 9
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.hidden != 0 {
		t.Error("Unmarshal does not replace the value")
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("%s\n got %#v\nwant %#v", data, out, in)
	}
	if sideReads != 0 {
		t.Errorf("nested values were read through their own UnmarshalJSON %d times: not one pass", sideReads)
	}
}

func TestUnmarshalKeepsNilAndEmpty(t *testing.T) {
	var r record
	if err := json.Unmarshal([]byte(`{"argv":[],"sides":null,"before":null}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Argv == nil || len(r.Argv) != 0 || r.Sides != nil || r.Before != nil {
		t.Fatalf("%#v", r)
	}
}

func TestUnmarshalRefusesBadBase64(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"path":"a","path_b64":"!!"}`, "base64 of \"a\""},
		{`{"argv":["a"],"argv_b64":["!!"]}`, "argv: base64 form 1"},
		{`{"argv":["a"],"argv_b64":["YQ==","Yg=="]}`, "argv: 1 names but 2 base64 forms"},
		{`{"sides":[{"target":"t","target_b64":"%"}]}`, "base64 of \"t\""},
		{`{"seq":"x"}`, "cannot unmarshal"},
	} {
		var r record
		err := json.Unmarshal([]byte(c.in), &r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestBadTagsAreRefused(t *testing.T) {
	type badKind struct {
		N int `jsonname:"b64"`
	}
	type badOpt struct {
		S string `jsonname:"b46"`
	}
	type badThen struct {
		S string `jsonname:"then:x=Nope"`
	}
	type embedded struct{ side }
	for _, v := range []any{badKind{}, badOpt{}, badThen{}, embedded{}} {
		if _, err := Marshal(v); err == nil {
			t.Errorf("%T: no error", v)
		}
	}
	if err := Unmarshal([]byte(`{}`), &badKind{}); err == nil {
		t.Error("Unmarshal accepted a bad tag")
	}
	var s side
	if err := Unmarshal([]byte(`{}`), s); err == nil || errors.Is(err, errNotStruct) {
		t.Errorf("Unmarshal into a value: %v", err)
	}
}

// A nil pointer is written as null, as encoding/json writes it.
func TestMarshalNilPointer(t *testing.T) {
	var r *record
	data, err := Marshal(r)
	if err != nil || string(data) != "null" {
		t.Fatalf("%s %v", data, err)
	}
}

// Plans are built once and shared: goroutines encoding and decoding the
// same types at once (run with -race).
func TestPlansAreShared(t *testing.T) {
	type fresh struct {
		P string `json:"p" jsonname:"b64"`
		S []side `json:"s"`
	}
	done := make(chan error)
	for range 8 {
		go func() {
			data, err := Marshal(fresh{P: "\xff", S: []side{{"a", "\xfe"}}})
			if err == nil {
				var out fresh
				err = Unmarshal(data, &out)
				if err == nil && (out.P != "\xff" || out.S[0].Target != "\xfe") {
					err = errors.New("names lost")
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
