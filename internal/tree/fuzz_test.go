package tree

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// FuzzDecodeManifest feeds Decode arbitrary bytes, both as they are and
// resealed with a matching checksum so that the parser behind the checksum
// is reached. Decode must never panic, and whatever it accepts must survive
// an Encode/Decode round trip unchanged.
func FuzzDecodeManifest(f *testing.F) {
	f.Add(encode(f, &Manifest{}))
	f.Add(encode(f, &Manifest{Fence: 7, ViewFence: -3, Entries: []Entry{
		{Path: "a", Type: Dir, Perm: 0o755, WS: Stat{Ino: 1, Dev: 2, Mtime: 3, Ctime: 4}},
		{Path: "a/f", Type: File, Perm: 0o644, Size: 5, Digest: "sha256:00", View: Stat{Ino: 9, Size: 5}},
		{Path: "l", Type: Symlink, Size: 1, Target: "a"},
		{Path: "p", Type: Special},
	}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(b []byte) {
			m, err := Decode(b)
			if err != nil {
				return
			}
			again, err := Decode(encode(t, m))
			if err != nil {
				t.Fatalf("re-encoded manifest does not decode: %v", err)
			}
			if !sameManifest(m, again) {
				t.Fatalf("round trip changed the manifest:\n got %+v\nwant %+v", again, m)
			}
		}
		check(data)
		if len(data) >= sha256.Size {
			check(reseal(data[:len(data)-sha256.Size]))
		}
	})
}

// FuzzSelector checks that ParseSelector and Match never panic, and that a
// selector without wildcards matches exactly its path and what lies beneath.
func FuzzSelector(f *testing.F) {
	for _, s := range [][2]string{
		{"src", "src/a"},
		{"src", "srcx"},
		{"a/b", "a/b"},
		{"**/*.go", "x/y.go"},
		{"a/**/b", "a/x/y/b/c"},
		{"[a-", "a"},
		{"a\\", "a"},
		{"../x", "x"},
		{"a/", "a/b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, s, p string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		got := sel.Match(p)
		raw := sel.String()
		if strings.ContainsAny(raw, "*?[\\") {
			return
		}
		want := p == raw || strings.HasPrefix(p, raw+"/")
		if got != want {
			t.Fatalf("%q.Match(%q) = %v, want %v", raw, p, got, want)
		}
		for _, q := range []string{raw, raw + "/x", raw + "x", "x/" + raw} {
			want := q == raw || strings.HasPrefix(q, raw+"/")
			if sel.Match(q) != want {
				t.Fatalf("%q.Match(%q) = %v, want %v", raw, q, !want, want)
			}
		}
		if raw != strings.TrimSuffix(s, "/") {
			t.Fatalf("String() = %q for %q", raw, s)
		}
	})
}
