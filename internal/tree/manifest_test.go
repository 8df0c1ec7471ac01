package tree

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

func randManifest(r *rand.Rand) *Manifest {
	m := &Manifest{Fence: r.Int64() - r.Int64(), ViewFence: r.Int64()}
	tr := randTree(r)
	if r.IntN(4) == 0 {
		tr["zz-special"] = Entry{Path: "zz-special", Type: Special, WS: randStat(r)}
	}
	if r.IntN(4) == 0 {
		tr["é/ü\x01\xff"] = Entry{Path: "é/ü\x01\xff", Type: File, Perm: 0o7777, Size: -1, Digest: ""}
	}
	m.Entries = tr.entries()
	return m
}

func encode(t testing.TB, m *Manifest) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameManifest compares fences and entries exactly (nil and empty entry
// lists are the same).
func sameManifest(a, b *Manifest) bool {
	if a.Fence != b.Fence || a.ViewFence != b.ViewFence || len(a.Entries) != len(b.Entries) {
		return false
	}
	for i := range a.Entries {
		if a.Entries[i] != b.Entries[i] {
			return false
		}
	}
	return true
}

// reseal replaces the checksum trailer of data so that it matches its body.
func reseal(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

func TestManifestRoundTrip(t *testing.T) {
	seeds(t, 500, func(t *testing.T, r *rand.Rand) {
		m := randManifest(r)
		got, err := Decode(encode(t, m))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !sameManifest(got, m) {
			t.Errorf("round trip changed the manifest:\n got %+v\nwant %+v", got, m)
		}
	})
	got, err := Decode(encode(t, &Manifest{}))
	if err != nil || len(got.Entries) != 0 || got.Fence != 0 {
		t.Errorf("empty manifest: %+v, %v", got, err)
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := randManifest(r)
	for len(m.Entries) < 3 {
		m = randManifest(r)
	}
	data := encode(t, m)
	check := func(what string, b []byte) {
		t.Helper()
		got, err := Decode(b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, %v; want ErrCorrupt", what, got, err)
		}
	}
	for i := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(data)
			b[i] ^= mask
			check("flipped byte", b)
		}
	}
	for n := range len(data) {
		check("truncated", data[:n])
	}
	check("appended byte", append(bytes.Clone(data), 0))
}

func TestDecodeRejectsBadBodies(t *testing.T) {
	valid := encode(t, &Manifest{Fence: 5, Entries: []Entry{
		{Path: "a", Type: File, Perm: 0o644, Digest: "sha256:1"},
		{Path: "b", Type: Dir, Perm: 0o755},
	}})
	body := valid[:len(valid)-sha256.Size]
	if _, err := Decode(reseal(body)); err != nil {
		t.Fatalf("resealed valid body: %v", err)
	}
	header := func(n uint64) []byte {
		b := []byte("WTXM\x01")
		b = binary.AppendVarint(b, 1)
		b = binary.AppendVarint(b, 2)
		return binary.AppendUvarint(b, n)
	}
	for _, tc := range []struct {
		name string
		m    *Manifest
		body []byte
	}{
		{name: "out of order", m: &Manifest{Entries: []Entry{{Path: "b", Type: File}, {Path: "a", Type: File}}}},
		{name: "duplicate", m: &Manifest{Entries: []Entry{{Path: "a", Type: File}, {Path: "a", Type: Dir}}}},
		{name: "empty path", m: &Manifest{Entries: []Entry{{Path: "", Type: File}}}},
		{name: "absent type", m: &Manifest{Entries: []Entry{{Path: "a", Type: Absent}}}},
		{name: "unknown type", m: &Manifest{Entries: []Entry{{Path: "a", Type: Special + 1}}}},
		{name: "trailing bytes", body: append(bytes.Clone(body), 0)},
		{name: "bad magic", body: append([]byte("WTXN"), body[4:]...)},
		{name: "unknown version", body: append([]byte("WTXM\x02"), body[5:]...)},
		{name: "count beyond data", body: header(1 << 40)},
		{name: "count one too many", body: append(header(3), body[len(header(2)):]...)},
		{name: "header only", body: []byte("WTXM\x01")},
		{name: "bad varint", body: append([]byte("WTXM\x01"), bytes.Repeat([]byte{0xff}, 11)...)},
		{name: "string beyond data", body: append(header(1), 0x7f, 'a')},
	} {
		data := tc.body
		if tc.m != nil {
			data = encode(t, tc.m)
		} else {
			data = reseal(data)
		}
		if got, err := Decode(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %+v, %v; want ErrCorrupt", tc.name, got, err)
		}
	}
}

func TestDigest(t *testing.T) {
	ref := func() []Entry {
		return []Entry{
			{Path: "d", Type: Dir, Perm: 0o755},
			{Path: "d/f", Type: File, Perm: 0o644, Digest: "sha256:1", Size: 3},
			{Path: "l", Type: Symlink, Target: "d/f", Size: 3},
		}
	}
	want := Digest(ref())
	for _, tc := range []struct {
		name    string
		edit    func([]Entry) []Entry
		changes bool
	}{
		{"stat tuples", func(es []Entry) []Entry {
			for i := range es {
				es[i].WS = Stat{Ino: uint64(i) + 1, Dev: 2, Size: 3, Mtime: 4, Ctime: 5}
				es[i].View = Stat{Ino: 9, Mtime: 8}
			}
			return es
		}, false},
		{"path", func(es []Entry) []Entry { es[2].Path = "m"; return es }, true},
		{"type", func(es []Entry) []Entry { es[1].Type = Symlink; es[1].Target = "sha256:1"; return es }, true},
		{"file perm", func(es []Entry) []Entry { es[1].Perm = 0o755; return es }, true},
		{"dir perm", func(es []Entry) []Entry { es[0].Perm = 0o700; return es }, true},
		{"digest", func(es []Entry) []Entry { es[1].Digest = "sha256:2"; return es }, true},
		{"target", func(es []Entry) []Entry { es[2].Target = "d"; return es }, true},
		{"entry dropped", func(es []Entry) []Entry { return es[:2] }, true},
		{"entry added", func(es []Entry) []Entry { return append(es, Entry{Path: "z", Type: Dir}) }, true},
	} {
		got := Digest(tc.edit(ref()))
		if (got != want) != tc.changes {
			t.Errorf("%s: digest changed = %v, want %v", tc.name, got != want, tc.changes)
		}
	}
	// Length prefixes keep neighbouring fields apart.
	a := Digest([]Entry{{Path: "ab", Type: Symlink, Target: "c"}})
	b := Digest([]Entry{{Path: "a", Type: Symlink, Target: "bc"}})
	if a == b {
		t.Error("digest confuses path and target boundaries")
	}
}

func TestLookupAndChildren(t *testing.T) {
	m := &Manifest{}
	for _, p := range []string{"a", "a-b", "a.txt", "a/b", "a/b/c", "a/d", "a0", "b", "b/x"} {
		m.Entries = append(m.Entries, Entry{Path: p, Type: Dir})
	}
	SortEntries(m.Entries)
	for _, p := range []string{"a", "a/b/c", "b/x", "a0", "a-b"} {
		if e := m.Lookup(p); e == nil || e.Path != p {
			t.Errorf("Lookup(%q) = %v", p, e)
		}
	}
	for _, p := range []string{"", "0", "a/", "a/c", "aa", "c", "b/x/y"} {
		if e := m.Lookup(p); e != nil {
			t.Errorf("Lookup(%q) = %v, want nil", p, e)
		}
	}
	if e := m.Lookup("a/b"); e != &m.Entries[3] {
		t.Error("Lookup does not return a pointer into Entries")
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{".", []string{"a", "a-b", "a.txt", "a0", "b"}},
		{"a", []string{"a/b", "a/d"}},
		{"a/b", []string{"a/b/c"}},
		{"a/b/c", nil},
		{"b", []string{"b/x"}},
		{"c", nil},
		{"a-b", nil},
	} {
		got := m.Children(tc.dir)
		var ps []string
		for _, e := range got {
			ps = append(ps, e.Path)
		}
		if len(ps) != len(tc.want) {
			t.Errorf("Children(%q) = %q, want %q", tc.dir, ps, tc.want)
			continue
		}
		for i := range ps {
			if ps[i] != tc.want[i] {
				t.Errorf("Children(%q) = %q, want %q", tc.dir, ps, tc.want)
				break
			}
		}
	}
	if (&Manifest{}).Lookup("a") != nil || len((&Manifest{}).Children(".")) != 0 {
		t.Error("empty manifest has entries")
	}
}

func TestRacy(t *testing.T) {
	m := &Manifest{Fence: 100e9, ViewFence: 50e9}
	for _, tc := range []struct {
		ws, view      Stat
		wsRacy, vRacy bool
	}{
		{Stat{Mtime: 10e9, Ctime: 10e9}, Stat{Mtime: 10e9, Ctime: 10e9}, false, false},
		{Stat{Mtime: 98e9 - 1, Ctime: 98e9 - 1}, Stat{Mtime: 50e9 - 1, Ctime: 50e9 - 1}, false, false},
		{Stat{Mtime: 98e9, Ctime: 1}, Stat{Mtime: 50e9, Ctime: 1}, true, true},
		{Stat{Mtime: 1, Ctime: 98e9}, Stat{Mtime: 1, Ctime: 50e9}, true, true},
		{Stat{Mtime: 200e9, Ctime: 1}, Stat{Mtime: 1, Ctime: 200e9}, true, true},
	} {
		e := &Entry{WS: tc.ws, View: tc.view}
		if got := m.WSRacy(e); got != tc.wsRacy {
			t.Errorf("WSRacy(%+v) = %v, want %v", tc.ws, got, tc.wsRacy)
		}
		if got := m.ViewRacy(e); got != tc.vRacy {
			t.Errorf("ViewRacy(%+v) = %v, want %v", tc.view, got, tc.vRacy)
		}
	}
}

// DecodeTaking reads what Decode reads, and its strings are the buffer's
// own bytes: no copy of a large manifest.
func TestDecodeTakingSharesTheBuffer(t *testing.T) {
	m := &Manifest{Fence: 7, ViewFence: 9, Entries: []Entry{
		{Path: "a", Type: File, Perm: 0o644, Size: 1, Digest: "sha256:aa"},
		{Path: "b/c", Type: Symlink, Target: "../a", Size: 4},
	}}
	var buf bytes.Buffer
	if err := Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	want, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTaking(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeTaking %+v, Decode %+v", got, want)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for _, e := range got.Entries {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(e.Path))); p < start || p >= start+uintptr(len(data)) {
			t.Fatalf("%q was copied out of the buffer", e.Path)
		}
	}
	if _, err := DecodeTaking(data[:len(data)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated manifest: %v, want ErrCorrupt", err)
	}
}
