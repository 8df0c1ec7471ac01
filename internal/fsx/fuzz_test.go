package fsx

import (
	"path"
	"strings"
	"testing"
)

// FuzzValidRel checks that every accepted rel path is local, clean and
// within the limits, so that no accepted path can name anything outside
// the root.
func FuzzValidRel(f *testing.F) {
	for _, s := range []string{".", "a", "a/b", "/etc", "..", "a/../b", "a//b", "a/", "./a", "a\x00", `a\..\b`, "é/e\u0301", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if ValidRel(rel) != nil || rel == "." {
			return
		}
		if len(rel) > MaxPathLen || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") ||
			strings.IndexByte(rel, 0) >= 0 || path.Clean(rel) != rel {
			t.Fatalf("accepted %q", rel)
		}
		for _, c := range strings.Split(rel, "/") {
			if c == "" || c == "." || c == ".." || len(c) > MaxNameLen {
				t.Fatalf("accepted %q with component %q", rel, c)
			}
		}
		if j := path.Join("root", rel); !strings.HasPrefix(j, "root/") {
			t.Fatalf("accepted %q, which joins to %q", rel, j)
		}
	})
}
