package bundle

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/tree"
)

func file(path, content string, perm uint32) *tree.Entry {
	return &tree.Entry{Path: path, Type: tree.File, Perm: perm, Size: int64(len(content)), Digest: string(blob.Sum([]byte(content)))}
}

func sample() *Bundle {
	b := &Bundle{
		Flags: FlagKeys,
		Origin: Origin{Stage: "tx-20261201T000000Z-01234567", Name: "n", Workspace: "/w", GitHead: "abc",
			BaseDigest: string(blob.Sum([]byte("base"))), ExportedAt: 42},
		Receipts: [][]byte{[]byte(`{"id":"rc-1"}`)},
		Keys:     [][]byte{bytes.Repeat([]byte{7}, KeySize), bytes.Repeat([]byte{9}, KeySize)},
		Entries: []Entry{
			{Path: "a.txt", Old: file("a.txt", "old\n", 0o644), New: file("a.txt", "new\n", 0o755), Base: []byte("old\n"), Content: []byte("new\n")},
			{Path: "d", New: &tree.Entry{Path: "d", Type: tree.Dir, Perm: 0o755}},
			{Path: "d/link", New: &tree.Entry{Path: "d/link", Type: tree.Symlink, Size: 5, Target: "../a\n"}},
			{Path: "gone", Old: file("gone", "x", 0o600)},
			{Path: "n\xff\xfe\nx", New: file("n\xff\xfe\nx", "", 0o600), Content: nil},
		},
	}
	b.Origin.ChangesetDigest = tree.ChangesetDigest(b.Changes())
	return b
}

func encode(t testing.TB, b *Bundle) []byte {
	var buf bytes.Buffer
	if err := Encode(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := sample()
	data := encode(t, b)
	got, err := Decode(data, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != b.Origin || len(got.Entries) != len(b.Entries) || string(got.Receipts[0]) != string(b.Receipts[0]) {
		t.Fatalf("round trip: got %+v", got)
	}
	if len(got.Keys) != 2 || !bytes.Equal(got.Keys[1], b.Keys[1]) || got.Flags != FlagKeys {
		t.Fatalf("round trip: keys %x, flags %#x", got.Keys, got.Flags)
	}
	for i := range b.Entries {
		w, g := b.Entries[i], got.Entries[i]
		if w.Path != g.Path || !tree.SameContent(w.Old, g.Old) || !tree.SameContent(w.New, g.New) || !bytes.Equal(w.Content, g.Content) ||
			!bytes.Equal(w.Base, g.Base) || (w.Base == nil) != (g.Base == nil) {
			t.Errorf("entry %d: got %+v want %+v", i, g, w)
		}
	}
	if tree.ChangesetDigest(got.Changes()) != b.Origin.ChangesetDigest {
		t.Error("change-set digest differs after the round trip")
	}
}

// Every byte of a bundle matters: flipping any bit of any byte, cutting it
// short or appending a byte is refused.
func TestEveryByteIsChecked(t *testing.T) {
	data := encode(t, sample())
	for i := range data {
		for _, mask := range []byte{0x01, 0x80} {
			bad := bytes.Clone(data)
			bad[i] ^= mask
			if _, err := Decode(bad, DefaultLimits); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#x: got %v, want ErrCorrupt", i, mask, err)
			}
		}
	}
	for _, bad := range [][]byte{data[:len(data)-1], append(bytes.Clone(data), 0), data[:10], nil} {
		if _, err := Decode(bad, DefaultLimits); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes: got %v, want ErrCorrupt", len(bad), err)
		}
	}
}

// reseal writes a body under a valid header and digest without Encode's
// checks, as a forger who knows the format would: Decode's shape checks
// must still refuse it.
func reseal(b *Bundle) []byte {
	var buf bytes.Buffer
	if err := encodeUnchecked(&buf, b); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func encodeUnchecked(w *bytes.Buffer, b *Bundle) error {
	var body bytes.Buffer
	fw, _ := flate.NewWriter(&body, flate.BestSpeed)
	var buf []byte
	o := &b.Origin
	for _, s := range []string{o.Stage, o.Name, o.Workspace, o.GitHead, o.GitDirty, o.BaseDigest, o.ChangesetDigest} {
		buf = binenc.AppendString(buf, s)
	}
	buf = binary.AppendVarint(buf, o.ExportedAt)
	buf = binary.AppendUvarint(buf, uint64(len(b.Receipts)))
	for _, r := range b.Receipts {
		buf = binenc.AppendString(buf, string(r))
	}
	if b.Flags&FlagKeys != 0 {
		buf = binary.AppendUvarint(buf, uint64(len(b.Keys)))
		for _, k := range b.Keys {
			buf = binenc.AppendString(buf, string(k))
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(b.Entries)))
	for i := range b.Entries {
		e := &b.Entries[i]
		buf = binenc.AppendString(buf, e.Path)
		buf = appendSide(buf, e.Old)
		buf = appendSide(buf, e.New)
		if e.Base == nil {
			buf = binenc.AppendString(append(buf, 0), string(e.Content))
		} else {
			// the whole content as the middle, nothing shared
			buf = binenc.AppendString(append(buf, 1), string(e.Base))
			buf = binenc.AppendString(append(buf, 0, 0), string(e.Content))
		}
	}
	fw.Write(buf)
	fw.Close()
	w.Write([]byte{'W', 'T', 'X', 'B', Version, byte(b.Flags)})
	w.Write(body.Bytes())
	sum := sha256.Sum256(w.Bytes())
	w.Write(sum[:])
	return nil
}

func TestHostileShapesRefused(t *testing.T) {
	cases := map[string]func(b *Bundle){
		"dot-dot":   func(b *Bundle) { b.Entries[0].Path = "../a.txt" },
		"absolute":  func(b *Bundle) { b.Entries[0].Path = "/a.txt" },
		"git":       func(b *Bundle) { b.Entries[0].Path = ".GiT/hooks" },
		"duplicate": func(b *Bundle) { b.Entries[1] = b.Entries[0] },
		"order":     func(b *Bundle) { b.Entries[0], b.Entries[1] = b.Entries[1], b.Entries[0] },
		"under link": func(b *Bundle) {
			e := b.Entries[4]
			e.Path = "d/link/x"
			b.Entries = []Entry{b.Entries[0], b.Entries[1], b.Entries[2], e, b.Entries[3]}
		},
		"content":      func(b *Bundle) { b.Entries[0].Content = []byte("NEW\n") },
		"size":         func(b *Bundle) { b.Entries[0].New.Size = 1 << 40 },
		"digest":       func(b *Bundle) { b.Entries[0].Old.Digest = string(blob.Sum([]byte("other"))) },
		"perm":         func(b *Bundle) { b.Entries[0].New.Perm = 0o4755 },
		"type":         func(b *Bundle) { b.Entries[1].New.Type = tree.Special },
		"nothing":      func(b *Bundle) { b.Entries[3].Old = nil },
		"dir content":  func(b *Bundle) { b.Entries[1].Content = []byte("x") },
		"flags":        func(b *Bundle) { b.Flags = 0x80 },
		"no-op":        func(b *Bundle) { b.Entries[0].New = b.Entries[0].Old; b.Entries[0].Content = []byte("old\n") },
		"base content": func(b *Bundle) { b.Entries[0].Base = []byte("OLD\n") },
		"base on add":  func(b *Bundle) { b.Entries[4].Base = []byte{} },
		"short key":    func(b *Bundle) { b.Keys[0] = b.Keys[0][:KeySize-1] },
		"same key":     func(b *Bundle) { b.Keys[1] = b.Keys[0] },
		"no keys":      func(b *Bundle) { b.Keys = nil },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			b := sample()
			mutate(b)
			if name != "digest" {
				// a forger recomputes the change-set digest too
				b.Origin.ChangesetDigest = tree.ChangesetDigest(b.Changes())
			}
			_, err := Decode(reseal(b), DefaultLimits)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
	// the resealer itself makes bundles Decode accepts (control)
	if _, err := Decode(reseal(sample()), DefaultLimits); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// A one-line edit of a large text file costs the base once and the edit,
// not two copies of the file.
func TestBaseAndEditedContentShareBytes(t *testing.T) {
	var base bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&base, "line %d of a long file\n", i)
	}
	edited := bytes.Replace(base.Bytes(), []byte("line 10000 of"), []byte("LINE 10000 OF"), 1)
	b := sample()
	b.Entries[0] = Entry{Path: "a.txt", Old: file("a.txt", base.String(), 0o644), New: file("a.txt", string(edited), 0o644),
		Base: base.Bytes(), Content: edited}
	b.Origin.ChangesetDigest = tree.ChangesetDigest(b.Changes())
	with := encode(t, b)
	b.Entries[0].Base = nil
	without := encode(t, b)
	if len(with) > len(without)+200 {
		t.Fatalf("the base made the bundle %d bytes instead of about %d", len(with), len(without))
	}
	got, err := Decode(with, DefaultLimits)
	if err != nil || !bytes.Equal(got.Entries[0].Content, edited) || !bytes.Equal(got.Entries[0].Base, base.Bytes()) {
		t.Fatalf("round trip with a base: %v", err)
	}
	for _, pair := range [][2]string{{"", ""}, {"abc", "abc"}, {"abc", ""}, {"", "abc"}, {"aaaa", "aa"}, {"aa", "aaaa"}, {"abXcd", "abYcd"}} {
		pre, suf := commonEnds([]byte(pair[0]), []byte(pair[1]))
		if pre+suf > min(len(pair[0]), len(pair[1])) {
			t.Errorf("commonEnds(%q, %q) = %d, %d: overlapping", pair[0], pair[1], pre, suf)
		}
	}
}

func TestDecompressionBombRefused(t *testing.T) {
	b := sample()
	big := strings.Repeat("\x00", 1<<20)
	b.Entries[0].New = file("a.txt", big, 0o644)
	b.Entries[0].Content = []byte(big)
	b.Origin.ChangesetDigest = tree.ChangesetDigest(b.Changes())
	data := encode(t, b)
	if len(data) > 16<<10 {
		t.Fatalf("1 MiB of zeros compressed to %d bytes", len(data))
	}
	_, err := Decode(data, Limits{Compressed: 1 << 20, Expanded: 64 << 10, Entries: 100})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := Decode(data, DefaultLimits); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, sample()))
	f.Add(reseal(sample()))
	f.Add([]byte("WTXB\x01\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data, Limits{Compressed: 1 << 20, Expanded: 1 << 20, Entries: 1000})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		// whatever decodes re-encodes and decodes to the same change set
		again, err := Decode(encode(t, b), DefaultLimits)
		if err != nil {
			t.Fatalf("re-encoded bundle refused: %v", err)
		}
		if tree.ChangesetDigest(again.Changes()) != b.Origin.ChangesetDigest {
			t.Fatal("change set differs after re-encoding")
		}
	})
}
