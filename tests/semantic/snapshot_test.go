package semantic

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// node is what a snapshot keeps of one path: everything S-STAGE-004 compares
// and nothing else (no times, owners or inodes).
type node struct {
	kind   string      // "file", "dir", "symlink" or "other"
	perm   fs.FileMode // permission, setuid, setgid and sticky bits; 0 for symlinks
	digest string      // sha256 of a file's content
	size   int64       // a file's size
	target string      // a symlink's target
}

func (n node) String() string {
	switch n.kind {
	case "file":
		return fmt.Sprintf("file %04o size %d sha256:%.12s", n.perm, n.size, n.digest)
	case "symlink":
		return fmt.Sprintf("symlink -> %q", n.target)
	default:
		return fmt.Sprintf("%s %04o", n.kind, n.perm)
	}
}

// snapshot walks root without following symlinks and records every path
// below it (slash-separated, relative to root).
func snapshot(root string) (map[string]node, error) {
	snap := make(map[string]node)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{perm: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
		switch {
		case fi.Mode().IsRegular():
			n.kind, n.size = "file", fi.Size()
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			n.digest = hex.EncodeToString(sum[:])
		case fi.IsDir():
			n.kind = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			n.kind, n.perm = "symlink", 0
			if n.target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			n.kind = "other"
		}
		snap[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, err)
	}
	return snap, nil
}

// diffSnapshots lists, sorted by path, every path where want and got differ.
func diffSnapshots(want, got map[string]node) []string {
	var out []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: missing, want %v", p, w))
		case g != w:
			out = append(out, fmt.Sprintf("%s: got %v, want %v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected %v", p, g))
		}
	}
	sort.Strings(out)
	return out
}

// formatDiff joins at most limit lines of a snapshot difference.
func formatDiff(lines []string, limit int) string {
	if len(lines) > limit {
		lines = append(lines[:limit:limit], fmt.Sprintf("... and %d more", len(lines)-limit))
	}
	return "\t" + strings.Join(lines, "\n\t")
}

// TestSnapshotDiff is the comparator's negative control: each change that
// S-STAGE-004 compares must show up, and a change of times alone must not.
func TestSnapshotDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(root string) error
		want   string // a difference line must start with this; "" for none
	}{
		{"content", func(r string) error { return os.WriteFile(filepath.Join(r, "f"), []byte("other"), 0o644) }, "f: got file"},
		{"mode", func(r string) error { return os.Chmod(filepath.Join(r, "f"), 0o755) }, "f: got file 0755"},
		{"dir mode", func(r string) error { return os.Chmod(filepath.Join(r, "d"), 0o700) }, "d: got dir 0700"},
		{"link target", func(r string) error {
			if err := os.Remove(filepath.Join(r, "l")); err != nil {
				return err
			}
			return os.Symlink("d", filepath.Join(r, "l"))
		}, `l: got symlink -> "d"`},
		{"type", func(r string) error {
			if err := os.Remove(filepath.Join(r, "f")); err != nil {
				return err
			}
			return os.Mkdir(filepath.Join(r, "f"), 0o755)
		}, "f: got dir"},
		{"missing", func(r string) error { return os.Remove(filepath.Join(r, "d", "g")) }, "d/g: missing"},
		{"extra", func(r string) error { return os.WriteFile(filepath.Join(r, "d", "new"), nil, 0o644) }, "d/new: unexpected"},
		{"times only", func(r string) error {
			old := time.Unix(1e9, 0)
			return os.Chtimes(filepath.Join(r, "f"), old, old)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			mustDo(t, os.WriteFile(filepath.Join(root, "f"), []byte("content"), 0o644))
			mustDo(t, os.Chmod(filepath.Join(root, "f"), 0o644))
			mustDo(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
			mustDo(t, os.Chmod(filepath.Join(root, "d"), 0o755))
			mustDo(t, os.WriteFile(filepath.Join(root, "d", "g"), nil, 0o644))
			mustDo(t, os.Symlink("f", filepath.Join(root, "l")))
			before := mustSnapshot(t, root)
			mustDo(t, tt.change(root))
			d := diffSnapshots(before, mustSnapshot(t, root))
			switch {
			case tt.want == "" && len(d) > 0:
				t.Fatalf("want no difference, got:\n%s", formatDiff(d, 10))
			case tt.want != "" && (len(d) != 1 || !strings.HasPrefix(d[0], tt.want)):
				t.Fatalf("want one difference starting %q, got %q", tt.want, d)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
