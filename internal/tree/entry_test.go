package tree

import (
	"io/fs"
	"testing"
	"unsafe"
)

func TestPathHelpers(t *testing.T) {
	for _, tc := range []struct {
		p, parent, base string
		depth           int
	}{
		{"a", ".", "a", 1},
		{"a/b", "a", "b", 2},
		{"a/b/c.txt", "a/b", "c.txt", 3},
	} {
		if got := Parent(tc.p); got != tc.parent {
			t.Errorf("Parent(%q) = %q, want %q", tc.p, got, tc.parent)
		}
		if got := Base(tc.p); got != tc.base {
			t.Errorf("Base(%q) = %q, want %q", tc.p, got, tc.base)
		}
		if got := Depth(tc.p); got != tc.depth {
			t.Errorf("Depth(%q) = %d, want %d", tc.p, got, tc.depth)
		}
	}
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"a", "a", true},
		{"a/b", "a", true},
		{"a/b/c", "a", true},
		{"ab", "a", false},
		{"a", "a/b", false},
		{"b/a", "a", false},
		{"a-b/c", "a", false},
	} {
		if got := IsUnder(tc.p, tc.dir); got != tc.want {
			t.Errorf("IsUnder(%q, %q) = %v, want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

func TestTypeOf(t *testing.T) {
	for _, tc := range []struct {
		m    fs.FileMode
		want Type
		name string
	}{
		{0o644, File, "file"},
		{fs.ModeDir | 0o755, Dir, "dir"},
		{fs.ModeSymlink | 0o777, Symlink, "symlink"},
		{fs.ModeNamedPipe, Special, "special"},
		{fs.ModeSocket, Special, "special"},
		{fs.ModeDevice | fs.ModeCharDevice, Special, "special"},
	} {
		got := TypeOf(tc.m)
		if got != tc.want || got.String() != tc.name {
			t.Errorf("TypeOf(%v) = %v (%q), want %v (%q)", tc.m, got, got.String(), tc.want, tc.name)
		}
	}
	if Absent.String() != "absent" {
		t.Errorf("Absent.String() = %q", Absent.String())
	}
}

func TestSameContent(t *testing.T) {
	f := Entry{Type: File, Perm: 0o644, Digest: "sha256:1"}
	s := Entry{Type: Special}
	if !SameContent(nil, nil) || SameContent(&f, nil) || SameContent(nil, &f) {
		t.Error("SameContent mishandles absent sides")
	}
	if SameContent(&s, &s) {
		t.Error("special entries compare as the same content")
	}
	for _, tc := range []struct {
		name string
		a, b Entry
		want bool
	}{
		{"equal digests", f, f, true},
		{"both digests unknown", Entry{Type: File, Perm: 0o644}, Entry{Type: File, Perm: 0o644}, false},
		{"unchanged, base digest unknown", Entry{Type: File, Perm: 0o644}, Entry{Type: File, Perm: 0o644, Unchanged: true}, true},
		{"unchanged, view digest known", f, Entry{Type: File, Perm: 0o644, Unchanged: true}, true},
		{"unchanged but other perm", f, Entry{Type: File, Perm: 0o600, Unchanged: true}, false},
		{"unchanged but digests disagree", f, Entry{Type: File, Perm: 0o644, Digest: "sha256:2", Unchanged: true}, false},
		{"unchanged but other type", f, Entry{Type: Dir, Perm: 0o644, Unchanged: true}, false},
		{"different digests", f, Entry{Type: File, Perm: 0o644, Digest: "sha256:2"}, false},
	} {
		if got := SameContent(&tc.a, &tc.b); got != tc.want {
			t.Errorf("%s: SameContent = %v, want %v", tc.name, got, tc.want)
		}
		if got := SameContent(&tc.b, &tc.a); got != tc.want {
			t.Errorf("%s (swapped): SameContent = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (&Entry{Perm: 0o4755}).ModeString() != "4755" || f.ModeString() != "0644" {
		t.Error("ModeString is not four octal digits")
	}
}

// An entry stays 144 bytes: a large tree holds hundreds of thousands of
// them, and a field in the wrong place pads every one.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); unsafe.Sizeof(uintptr(0)) == 8 && n != 144 {
		t.Fatalf("Entry is %d bytes, want 144", n)
	}
}
