package wtx

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wtx-dev/wtx/internal/jsonname"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire from the current encoders")

// wireCase is one value of a type that carries names through JSON. Its
// encoding is compared with a golden file written by the hand-made
// encoders that came before the tag-driven one; roundTrip says that
// decoding the golden gives the value back (false where the encoding drops
// something on purpose: an empty list under omitempty, a nil list written
// as []).
type wireCase struct {
	name      string
	value     any
	roundTrip bool
}

var wireNames = []string{"a.txt", "dir/é ü.txt", "\xff", "a\xfe\xffb", "line\nbreak\t\"q\"", "\xef\xbf\xbd", "<&>", ""}

func wireCases() []wireCase {
	now := time.Date(2026, 12, 1, 8, 15, 0, 123, time.UTC)
	size := int64(3)
	mode := uint32(0o755)
	file0 := &Side{Type: "file", Mode: "0644", Size: 3, Digest: "sha256:ab"}
	var cs []wireCase
	add := func(name string, v any, rt bool) { cs = append(cs, wireCase{name, v, rt}) }
	for i, n := range wireNames {
		side := &Side{Type: "symlink", Target: n}
		file := &Side{Type: "file", Mode: "0644", Size: 3, Digest: "sha256:ab"}
		ch := Change{Path: n, Action: "added", Type: "symlink", Size: &size, Target: n, Before: side}
		add(fmt.Sprintf("Side/%d", i), Side{Type: "symlink", Size: 9, Target: n}, true)
		add(fmt.Sprintf("Change/%d", i), ch, true)
		add(fmt.Sprintf("Change/deleted/%d", i), Change{Path: n, Action: "deleted", Before: file}, true)
		add(fmt.Sprintf("Conflict/%d", i), Conflict{Path: n, Kind: "modified", Base: "b", Current: "c", Detail: "d", Op: "op-1"}, true)
		add(fmt.Sprintf("Conflict/symlink/%d", i), Conflict{Path: n, Kind: "symlink"}, true)
		add(fmt.Sprintf("Repair/%d", i), Repair{Action: RepairApprove, Class: ClassProtected, Detail: "d", Stage: "tx-1", Paths: []string{"a", n}, Command: "c"}, true)
		add(fmt.Sprintf("FileResult/%d", i), FileResult{TxOp: 2, Path: n, Digest: "d", Size: 3, Before: "absent", Changes: []Change{ch}, Strategy: "staged"}, true)
		add(fmt.Sprintf("TxFile/%d", i), TxFile{Path: n, Before: side, After: file}, true)
		add(fmt.Sprintf("TxOp/%d", i), TxOp{Seq: 3, Kind: "edit", Argv: []string{"edit", n}, Created: now,
			Files: []TxFile{{Path: n, Before: side}, {Path: "b", After: file}}, Old: n, New: n + "x", All: true, ExpectHash: "h",
			Status: RunDone, Signal: "SIGTERM", Checkpoint: true, Mkdirs: []string{"d", n},
			Pending: &TxIntent{Before: side, After: file, Temp: ".t", Refresh: true, Base: side}, Flow: "f"}, true)
		add(fmt.Sprintf("stageConfig/%d", i), stageConfig{Exclude: []string{n}, Share: []string{"s", n}, Protect: []string{n, "p"},
			Skipped: []BackendSkip{{Backend: "overlay", Reason: "r"}}, Ops: []string{"op-1"}, RootMode: &mode, At: "op-0",
			Import:  &ImportOrigin{FromTx: "tx-9", FromWorkspace: "/w", BaseDigest: "b", ChangesetDigest: "c", Receipts: []json.RawMessage{}},
			Rebased: []RebaseMark{{Path: []byte(n), AfterOp: 2}}, Conflicted: []ConflictMark{{Path: []byte(n), Ours: "o", Theirs: "t"}}, NoProject: true}, true)
		add(fmt.Sprintf("Op/%d", i), Op{ID: "op-1", Kind: "apply", Tx: "tx-1", Created: now, Written: []string{n, "w"}, Changes: []Change{ch},
			Undoes: "op-0", UndoneBy: "op-2", PartlyUndoneBy: []string{"op-3"}}, true)
		add(fmt.Sprintf("Status/%d", i), Status{Tx: "tx-1", Name: n, State: StateOpen, Running: true, Run: &RunInfo{PID: 7, Started: now},
			Backend: "copy", Skipped: []BackendSkip{{Backend: "overlay", Reason: "r"}}, View: "frozen", Created: now, At: "op-1", Exclude: []string{n}, Share: []string{"s"},
			Protect: []string{"p", n}, Counts: Counts{Added: 1}, ChangesetDigest: "c", Changes: []Change{ch},
			Drift: []Conflict{{Path: n, Kind: "modified"}}, StaleReads: []Conflict{{Path: "r", Kind: "stale-read"}}, Conflicted: []string{n}, Special: []string{n, "s"},
			LeftOut: []LeftOut{{Path: n, Type: "file"}}, Ops: []string{"op-1"},
			TxOps:            []TxOp{{Seq: 1, Kind: "write", Argv: []string{"write", n}, Created: now, Files: []TxFile{{Path: n, After: file}}}},
			NotTransactional: []string{"/dev/x"}}, utf8.ValidString(n))
		add(fmt.Sprintf("Finding/%d", i), Finding{Kind: FindNotPrivate, Code: "c", Path: n, Object: "o", Detail: "d", Repair: "r",
			Workspace: n, Repairs: []Repair{{Action: RepairApprove, Detail: "d", Paths: []string{n}}}, Repaired: true}, true)
		add(fmt.Sprintf("LeftOut/%d", i), LeftOut{Path: n, Type: "dir"}, false)
		add(fmt.Sprintf("DriftEntry/%d", i), DriftEntry{Path: n, Kind: "modified", Stale: true, Base: "b", Current: "c", Shown: true, Note: "n"}, false)
		add(fmt.Sprintf("BatchItemResult/%d", i), BatchItemResult{Index: 1, Command: "read", Path: n, TxOp: 2, Digest: "d", Content: n + "\x00\xc3"}, false)
		add(fmt.Sprintf("Diagnostic/%d", i), Diagnostic{Index: 1, Line: 2, Command: "write", Path: n, Status: DiagError, Code: "c", Message: "m"}, false)
		add(fmt.Sprintf("FsckReport/%d", i), FsckReport{StateDir: n, Findings: []Finding{{Kind: FindNotPrivate, Path: n}},
			Checked: FsckChecked{Stages: 2}, SetAside: n + "/lost"}, true)
	}
	add("Side/file", *file0, true)
	add("Change/file", Change{Path: "f", Action: "modified", Type: "file", Mode: "0644", Size: &size, Digest: "sha256:cd", Before: file0}, true)
	// The root's mode change is written with its notice, and not read back.
	add("Status/root-mode", Status{Tx: "tx-1", RootMode: &RootModeChange{Was: 0o755, Now: 0o700}}, false)
	// A text that is not a name is not kept byte for byte.
	add("Conflict/detail", Conflict{Path: "p", Kind: "modified", Detail: "a\xffb"}, false)
	// Empty and nil lists, nil pointers, zero values.
	add("Side/zero", Side{}, true)
	add("Change/zero", Change{}, true)
	add("Conflict/zero", Conflict{}, true)
	add("Repair/zero", Repair{}, true)
	add("Repair/empty-paths", Repair{Action: RepairApprove, Paths: []string{}}, false)
	add("FileResult/zero", FileResult{}, false)
	add("FileResult/empty", FileResult{Changes: []Change{}}, true)
	add("TxFile/zero", TxFile{}, true)
	add("TxOp/zero", TxOp{}, true)
	add("TxOp/empty", TxOp{Argv: []string{}, Files: []TxFile{}, Mkdirs: []string{}}, false)
	add("TxOp/empty-lists", TxOp{Argv: []string{}, Files: []TxFile{}}, true)
	add("stageConfig/zero", stageConfig{}, true)
	add("stageConfig/empty", stageConfig{Exclude: []string{}, Share: []string{}, Protect: []string{}}, false)
	add("Op/zero", Op{}, true)
	add("Op/empty", Op{Written: []string{}, Changes: []Change{}}, true)
	add("Status/zero", Status{}, true)
	add("Status/empty", Status{Exclude: []string{}, Share: []string{}, Protect: []string{}, Conflicted: []string{}, Special: []string{},
		Changes: []Change{}, Drift: []Conflict{}, StaleReads: []Conflict{}, Ops: []string{}, TxOps: []TxOp{}, NotTransactional: []string{}}, true)
	add("Finding/zero", Finding{}, true)
	add("FsckReport/zero", FsckReport{}, true)
	add("LeftOut/zero", LeftOut{}, false)
	add("DriftEntry/zero", DriftEntry{}, false)
	add("BatchItemResult/zero", BatchItemResult{}, false)
	add("Diagnostic/zero", Diagnostic{}, false)
	add("FsckReport/empty", FsckReport{Findings: []Finding{}}, true)
	return cs
}

// The encoding of every type that carries names is byte for byte what it
// was (testdata/wire, written by the hand-made encoders before the
// tag-driven one replaced them), for names that are UTF-8, names that are
// not, names with newlines and quotes, empty and nil lists and nil
// pointers.
func TestWireBytesUnchanged(t *testing.T) {
	golden := map[string][]byte{}
	var out bytes.Buffer
	for _, c := range wireCases() {
		data, err := json.Marshal(c.value)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		golden[c.name] = data
		fmt.Fprintf(&out, "%s %s\n", c.name, data)
	}
	file := filepath.Join("testdata", "wire", "golden.txt")
	if *updateWire {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := bytes.Split(out.Bytes(), []byte("\n")), bytes.Split(want, []byte("\n"))
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d encodings, golden has %d", len(gotLines), len(wantLines))
	}
	for i := range gotLines {
		if !bytes.Equal(gotLines[i], wantLines[i]) {
			t.Errorf("encoding changed:\n got %s\nwant %s", gotLines[i], wantLines[i])
		}
	}
}

// Each golden decodes back to the value it was written from.
func TestWireGoldensDecode(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "wire", "golden.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]byte{}
	for _, l := range bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n")) {
		name, data, _ := bytes.Cut(l, []byte(" "))
		lines[string(name)] = data
	}
	for _, c := range wireCases() {
		data, ok := lines[c.name]
		if !ok {
			t.Fatalf("%s: no golden", c.name)
		}
		if !c.roundTrip {
			continue
		}
		out := reflect.New(reflect.TypeOf(c.value))
		if err := wireDecode(data, out.Interface()); err != nil {
			t.Fatalf("%s: %s: %v", c.name, data, err)
		}
		if !reflect.DeepEqual(out.Elem().Interface(), c.value) {
			t.Errorf("%s: %s decodes to\n %#v\nwant %#v", c.name, data, out.Elem().Interface(), c.value)
		}
	}
}

// A run's record carries every file its command changed: decoding it is one
// pass over its bytes (go test -bench TxOp).
func BenchmarkDecodeTxOp20k(b *testing.B) {
	op := TxOp{Seq: 1, Kind: "run", Argv: []string{"sh", "-c", "make"}, Created: time.Now().UTC(), Status: RunDone, Checkpoint: true}
	for i := range 20000 {
		p := fmt.Sprintf("src/pkg%d/file%d.go", i%100, i)
		if i%50 == 0 {
			p += "\xff"
		}
		op.Files = append(op.Files, TxFile{Path: p, Before: &Side{Type: "file", Mode: "0644", Size: int64(i), Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
			After: &Side{Type: "file", Mode: "0644", Size: int64(i + 1), Digest: "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"}})
	}
	data, err := json.Marshal(op)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var out TxOp
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// wireDecode reads a golden back: through the type's UnmarshalJSON where it
// has one, else through the encoder the type's MarshalJSON uses.
func wireDecode(data []byte, out any) error {
	if _, ok := out.(json.Unmarshaler); ok {
		return json.Unmarshal(data, out)
	}
	return jsonname.Unmarshal(data, out)
}

// No field of a type that carries names is left out of its JSON unless its
// tag says so (json:"-"): every other exported field is set in some value
// of the table, and its JSON name is then a key of that value's encoding
// (and where the value round-trips, TestWireGoldensDecode gets it back).
// A field added to one of these types without a decision fails here until
// a value sets it, and then fails TestWireBytesUnchanged until its golden
// is written again.
func TestWireTableCoversEveryField(t *testing.T) {
	seen := map[reflect.Type]map[string]bool{}
	for _, c := range wireCases() {
		v := reflect.ValueOf(c.value)
		if seen[v.Type()] == nil {
			seen[v.Type()] = map[string]bool{}
		}
		data, err := json.Marshal(c.value)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if fv := v.Field(i); fv.IsZero() || fv.Kind() == reflect.Slice && fv.Len() == 0 || !f.IsExported() {
				continue
			}
			seen[v.Type()][f.Name] = true
			if key := `"` + jsonName(f) + `":`; f.Tag.Get("json") != "-" && !bytes.Contains(data, []byte(key)) {
				t.Errorf("%s: %s.%s is set but %s is not in %s", c.name, v.Type().Name(), f.Name, key, data)
			}
		}
	}
	for ty, seen := range seen {
		for i := range ty.NumField() {
			f := ty.Field(i)
			if f.IsExported() && f.Tag.Get("json") != "-" && !seen[f.Name] {
				t.Errorf("%s.%s is set in no value of wireCases", ty.Name(), f.Name)
			}
		}
	}
}

// A damaged record is refused with the error the hand-made decoders gave
// (the base64 ones word for word; encoding/json's own now name the type
// read, not a twin of it).
func TestWireDamagedRecordsRefused(t *testing.T) {
	for _, c := range []struct {
		in   string
		out  any
		want string
	}{
		{`{"argv":["a"],"argv_b64":["!"]}`, &TxOp{}, "argv: base64 form 1: illegal base64 data at input byte 0"},
		{`{"files":[{"path":"a","path_b64":"*"}]}`, &TxOp{}, `base64 of "a": illegal base64 data at input byte 0`},
		{`{"files":[{"path":"a","before":{"target":"x","target_b64":"?"}}]}`, &TxOp{}, `base64 of "x": illegal base64 data at input byte 0`},
		{`{"files":[{"path":"a","after":{"target":"x","target_b64":"?"}}]}`, &TxOp{}, `base64 of "x": illegal base64 data at input byte 0`},
		{`{"mkdirs":["a"],"mkdirs_b64":["YQ==","YQ=="]}`, &TxOp{}, "mkdirs: 1 names but 2 base64 forms"},
		{`{"old":"x","old_b64":"%%"}`, &TxOp{}, `base64 of "x": illegal base64 data at input byte 0`},
		{`{"new":"x","new_b64":"%%"}`, &TxOp{}, `base64 of "x": illegal base64 data at input byte 0`},
		{`{"pending":{"before":{"target_b64":"!"}}}`, &TxOp{}, `base64 of "": illegal base64 data at input byte 0`},
		{`{"tx_op":"1"}`, &TxOp{}, "json: cannot unmarshal string into Go struct field TxOp.tx_op of type int"},
		{`{"files":{}}`, &TxOp{}, "json: cannot unmarshal object into Go struct field TxOp.files of type []wtx.TxFile"},
		{`{"files":[{"after":{"size":"1"}}]}`, &TxOp{}, "json: cannot unmarshal string into Go struct field TxOp.files.after.size of type int64"},
		{`[]`, &TxOp{}, "json: cannot unmarshal array into Go value of type wtx.TxOp"},
		{`{"exclude":["a"],"exclude_b64":["!"]}`, &stageConfig{}, "exclude: base64 form 1: illegal base64 data at input byte 0"},
		{`{"share_b64":["!"]}`, &stageConfig{}, "share: base64 form 1: illegal base64 data at input byte 0"},
		{`{"protect":["a","b"],"protect_b64":["YQ=="]}`, &stageConfig{}, "protect: 2 names but 1 base64 forms"},
		{`{"paths":["a"],"paths_b64":["!"]}`, &Repair{}, "paths: base64 form 1: illegal base64 data at input byte 0"},
		{`{"path":"a","path_b64":"!"}`, &Conflict{}, `base64 of "a": illegal base64 data at input byte 0`},
		{`{"path":"a","before":{"target_b64":"!"}}`, &Change{}, `base64 of "": illegal base64 data at input byte 0`},
		{`{"path":"a","path_b64":"!"}`, &TxFile{}, `base64 of "a": illegal base64 data at input byte 0`},
		{`{"size":"1"}`, &Side{}, "json: cannot unmarshal string into Go struct field Side.size of type int64"},
	} {
		if err := json.Unmarshal([]byte(c.in), c.out); err == nil || err.Error() != c.want {
			t.Errorf("%T %s: %v\nwant %s", c.out, c.in, err, c.want)
		}
	}
	var op TxOp
	if err := json.Unmarshal([]byte(`null`), &op); err != nil {
		t.Errorf("null: %v", err)
	}
}
