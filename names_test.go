package wtx

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wtx-dev/wtx/internal/tree"
)

// Every record that carries names keeps their exact bytes through JSON, and
// a record written before the byte-safe fields existed still reads.
func TestRecordsKeepNameBytes(t *testing.T) {
	odd := []string{"\xff", "a\xfe\xffb", "\xef\xbf\xbd", "dir/\x1b[2K\n", "-rf", "ok.txt"}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range odd {
		op := TxOp{Seq: 1, Kind: "edit", Argv: []string{"edit", name}, Created: now,
			Files: []TxFile{{Path: name, Before: &Side{Type: "symlink", Target: name}}}, Old: name, New: name + "x"}
		roundTrip(t, op, &TxOp{})
		body := opBody{Stage: "tx-1", Paths: []string{name}, Written: []string{"a", name},
			Changes: []opChange{{Path: name, Old: &entryJSON{Type: "symlink", Target: name}}}}
		roundTrip(t, body, &opBody{})
		cfg := stageConfig{Exclude: []string{name}, Protect: []string{"x", name}, Share: []string{name}}
		roundTrip(t, cfg, &stageConfig{})
		rc := Receipt{SchemaVersion: 1, Workspace: "/w/" + name, Command: []string{"sh", name}, Paths: []string{name}, CreatedAt: now}
		roundTrip(t, rc, &Receipt{})
		roundTrip(t, Change{Path: name, Action: "added", Target: name, Before: &Side{Target: name}}, &Change{})
		roundTrip(t, Conflict{Path: name, Kind: "modified"}, &Conflict{})
	}
}

func roundTrip[T any](t *testing.T, v T, out *T) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(data) {
		t.Fatalf("%q is not UTF-8", data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if !reflect.DeepEqual(v, *out) {
		t.Fatalf("round trip through %s:\n got %#v\nwant %#v", data, *out, v)
	}
}

// Rows written by earlier versions (no *_b64 fields) read as they always did.
func TestRecordsOldFormatReads(t *testing.T) {
	var op TxOp
	if err := json.Unmarshal([]byte(`{"tx_op":2,"kind":"write","argv":["write","a.txt"],"created":"2026-11-30T08:15:00Z","files":[{"path":"a.txt","before":null,"after":{"type":"file","mode":"0644","size":1,"digest":"sha256:x"}}]}`), &op); err != nil {
		t.Fatal(err)
	}
	if op.Seq != 2 || op.Argv[1] != "a.txt" || op.Files[0].Path != "a.txt" || op.Files[0].After.Size != 1 {
		t.Fatalf("%+v", op)
	}
	var cfg stageConfig
	if err := json.Unmarshal([]byte(`{"exclude":["*.key"],"protect":["conf"]}`), &cfg); err != nil || cfg.Exclude[0] != "*.key" || cfg.Protect[0] != "conf" {
		t.Fatalf("%+v %v", cfg, err)
	}
	var b opBody
	if err := json.Unmarshal([]byte(`{"stage":"tx-1","paths":[],"written":["a"],"changeset_digest":"d","changes":[{"path":"a","old":null,"new":{"type":"file","perm":420,"size":1}}]}`), &b); err != nil || b.Written[0] != "a" || b.Changes[0].New.Perm != 0o644 {
		t.Fatalf("%+v %v", b, err)
	}
	// A receipt without odd names encodes byte for byte as before, so the
	// digests of stored receipts still match.
	exit := 0
	rc := Receipt{SchemaVersion: 1, ID: "rc-1", Kind: "run", Workspace: "/w", Tx: "tx-1", Command: []string{"make"}, ExitCode: &exit, Paths: []string{}, NotTransactional: []string{}}
	type plain Receipt
	want, _ := json.Marshal(plain(rc))
	got, _ := json.Marshal(rc)
	if string(got) != string(want) {
		t.Fatalf("receipt encoding changed:\n got %s\nwant %s", got, want)
	}
}

// The review screen selects a path with LiteralSelector: its bytes, not a
// decoded copy of them.
func TestLiteralSelectorKeepsBytes(t *testing.T) {
	for _, p := range []string{"a\xff*", "\xfe?[x]", "lit\uFFFD", `b\ack`} {
		sel, err := tree.ParseSelector(LiteralSelector(p))
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if !sel.Match(p) {
			t.Errorf("LiteralSelector(%q) does not match it", p)
		}
		if other := strings.Replace(p, "\xff", "\xfe", 1) + "z"; sel.Match(other) {
			t.Errorf("LiteralSelector(%q) matches %q", p, other)
		}
	}
}

// Each type that encodes itself byte-safely mirrors its fields in a JSON
// twin: a field added to the type but not to the twin would vanish from
// every record and answer. Every JSON field of the type must be in its twin.
func TestByteSafeTwinsHaveEveryField(t *testing.T) {
	for _, p := range []struct{ typ, twin any }{
		{opBody{}, opBodyJSON{}}, {opChange{}, opChangeJSON{}}, {entryJSON{}, entryJSONJSON{}},
	} {
		twin := map[string]bool{}
		tt := reflect.TypeOf(p.twin)
		for i := 0; i < tt.NumField(); i++ {
			twin[jsonName(tt.Field(i))] = true
		}
		ty := reflect.TypeOf(p.typ)
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if n := jsonName(f); f.IsExported() && n != "-" && !twin[n] {
				t.Errorf("%s.%s (%q) is missing from %s", ty.Name(), f.Name, n, tt.Name())
			}
		}
	}
}

func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}
