package tree

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Type is the kind of a tree entry.
type Type uint8

// Entry types. Special covers FIFOs, sockets and devices, which wtx never
// stages or applies. The numbers are persisted (manifests and journals write
// them, and the content digests hash them): never renumber one.
const (
	Absent  Type = 0 // persisted
	File    Type = 1 // persisted
	Dir     Type = 2 // persisted
	Symlink Type = 3 // persisted
	Special Type = 4 // persisted
)

// String returns the name used in JSON output: "file", "dir", "symlink".
func (t Type) String() string {
	switch t {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case Special:
		return "special"
	}
	return "absent"
}

// TypeOf maps an fs.FileMode to a Type.
func TypeOf(m fs.FileMode) Type {
	switch {
	case m.IsRegular():
		return File
	case m.IsDir():
		return Dir
	case m&fs.ModeSymlink != 0:
		return Symlink
	}
	return Special
}

// PermMask is the set of permission bits wtx records and applies. Setuid,
// setgid and sticky bits are never carried into a workspace.
const PermMask = 0o777

// Stat is the stat tuple of one file as seen at some moment. Two equal tuples
// mean "unchanged" unless the tuple is racy (see [Manifest.Racy]).
type Stat struct {
	Ino   uint64
	Dev   uint64
	Size  int64
	Mtime int64 // ns
	Ctime int64 // ns
}

// Entry is one path of a tree.
type Entry struct {
	Path string
	Type Type
	// Unchanged marks a view entry that a backend knows to hold its base
	// entry's content without having read it: an overlay path the stage
	// never wrote, or a cloned file whose stat tuple proves it untouched.
	// Its Digest is the base's, which may be unknown (""). It is never set
	// on base entries and never recorded in a manifest. (It sits beside
	// Type, in the padding before Perm: an entry is 144 bytes, not 152,
	// and a large tree holds hundreds of thousands of them.)
	Unchanged bool
	Perm      uint32 // permission bits, PermMask only; 0 for symlinks
	Size      int64  // bytes of content for files, len(Target) for symlinks
	Digest    string // "sha256:…" of a file's content; "" when unknown
	Target    string // a symlink's target

	WS   Stat // the workspace copy when the manifest was taken
	View Stat // the staged copy right after staging (copy and clone backends)
}

// SameContent reports whether a and b have the same type, permission bits and
// content (digest or link target). Stat tuples are ignored. Two files are the
// same only if their digests are known and equal, or if either is marked
// Unchanged (then a digest known on both sides must still agree).
func SameContent(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case File:
		if a.Perm != b.Perm {
			return false
		}
		if a.Unchanged || b.Unchanged {
			return a.Digest == "" || b.Digest == "" || a.Digest == b.Digest
		}
		return a.Digest == b.Digest && a.Digest != ""
	case Dir:
		return a.Perm == b.Perm
	case Symlink:
		return a.Target == b.Target
	}
	return false
}

// ModeString renders the permission bits as four octal digits ("0644").
func (e *Entry) ModeString() string {
	return fmt.Sprintf("%04o", e.Perm)
}

// Depth is the number of slash-separated components of p.
func Depth(p string) int { return strings.Count(p, "/") + 1 }

// Parent returns the parent of p, "." for a top-level path.
func Parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// Base returns the last component of p.
func Base(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// IsUnder reports whether p equals dir or lies beneath it.
func IsUnder(p, dir string) bool {
	return p == dir || (len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir)
}

// SortEntries sorts entries by path, bytewise.
func SortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
}
