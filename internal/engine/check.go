package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Checked is what a check of a change set found.
type Checked struct {
	// Todo are the changes to write (their paths hold Old), Already those
	// in place (their paths hold New).
	Todo, Already []tree.Change
	// Conflicts are the paths that hold anything else: every one.
	Conflicts []Conflict
	// Ident holds, per path, the workspace object the check saw there,
	// which the executor checks again just before it displaces it.
	Ident map[string]fsx.Stat
}

// Check is the compare half of the engine's compare-and-swap: it compares
// what every path of cs holds in the workspace at root now with the
// change's pre-image (Old) and post-image (New). Apply and undo use it to
// decide what to write, status and rebase to report drift, and recovery to
// tell what an interrupted apply left. Without base it reads and hashes
// every file (an apply or undo decides what to write on content alone);
// with base, a file whose stat tuple still matches its entry in base is
// trusted to hold its base digest (status, rebase, recovery). progress, if
// set, hears of each path checked (i of n).
func Check(ctx context.Context, root *fsx.Root, base *tree.Manifest, cs []tree.Change, progress func(i, n int)) (*Checked, error) {
	c := newCASReader(root, base)
	c.progress = progress
	todo, already, conflicts, err := c.check(ctx, cs)
	if err != nil {
		return nil, err
	}
	return &Checked{Todo: todo, Already: already, Conflicts: conflicts, Ident: c.ident}, nil
}

// casReader reads a change set's paths for Check, remembering the object
// it saw at each path (ident).
type casReader struct {
	root *fsx.Root
	cr   ContentReader
	// ident holds, per path, the workspace object the reader saw.
	ident map[string]fsx.Stat
	// progress, if set, hears of each path checked (i of n).
	progress func(i, n int)
	// dirs holds the directories open during a check.
	dirs *fsx.DirCache
}

// newCASReader returns a reader of root, with base as Check says.
func newCASReader(root *fsx.Root, base *tree.Manifest) *casReader {
	c := &casReader{root: root, ident: map[string]fsx.Stat{}}
	if base != nil {
		c.cr.Known = func(rel string, st fsx.Stat) (string, bool) {
			b := base.Lookup(rel)
			if b == nil || b.Type != tree.File || base.WSRacy(b) ||
				b.WS != (tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}) {
				return "", false
			}
			return b.Digest, true
		}
	}
	return c
}

// check compares every path of cs with the workspace and splits the changes
// into those to write (the path holds Old), those already in place (it
// holds New), and conflicts (anything else). Every path is looked at: the
// conflicts are complete.
func (c *casReader) check(ctx context.Context, cs []tree.Change) (todo, already []tree.Change, conflicts []Conflict, err error) {
	// One pass: each directory is opened once. The executor opens them
	// afresh and checks each object again before it displaces it.
	c.dirs = fsx.NewDirCache(c.root)
	defer func() { c.dirs.Close(); c.dirs = nil }()
	selected := make(map[string]*tree.Change, len(cs))
	for i := range cs {
		selected[cs[i].Path] = &cs[i]
	}
	for i := range cs {
		ch := cs[i]
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		if c.progress != nil {
			c.progress(i, len(cs))
		}
		cur, cf, err := c.current(ctx, ch, selected)
		if err != nil {
			return nil, nil, nil, err
		}
		if cf != nil {
			conflicts = append(conflicts, *cf)
			continue
		}
		if failpoint.Disabled("cas") {
			todo = append(todo, ch) // negative control: no compare-and-swap
			continue
		}
		switch {
		case cur.Holds(ch.Old) && modeOnly(ch) && c.ident[ch.Path].Nlink > 1:
			// fchmod would change the file's other hard links too, which
			// may lie outside the workspace.
			conflicts = append(conflicts, Conflict{Path: ch.Path, Kind: KindSharedInode,
				Detail: "a mode-only change of a file with other hard links would change them too"})
		case cur.Holds(ch.Old):
			if ch.Old != nil && ch.Old.Type == tree.Dir && (ch.New == nil || ch.New.Type != tree.Dir) {
				if cf := c.checkEmptied(ch.Path, selected); cf != nil {
					conflicts = append(conflicts, *cf)
					continue
				}
			}
			todo = append(todo, ch)
		case cur.Holds(ch.New):
			already = append(already, ch)
		default:
			conflicts = append(conflicts, describeConflict(ch, cur))
		}
	}
	return todo, already, conflicts, nil
}

// current reads what ch's path holds now. A directory above it that is in
// the way gives a conflict, unless this change set makes or removes that
// directory itself.
func (c *casReader) current(ctx context.Context, ch tree.Change, selected map[string]*tree.Change) (NameAt, *Conflict, error) {
	rel := ch.Path
	cur, err := entryAtCached(ctx, c.dirs, rel, c.cr)
	if errors.Is(err, errBeingWritten) {
		return cur, &Conflict{Path: rel, Kind: KindModified, Detail: errBeingWritten.Error()}, nil
	}
	if err != nil {
		return cur, nil, err
	}
	parent := tree.Parent(rel)
	switch cur.Presence {
	case Present:
		c.ident[rel] = cur.Stat
		return cur, nil, nil
	case Absent:
		return cur, nil, nil
	case ParentMount:
		return cur, &Conflict{Path: rel, Kind: KindBoundary, Detail: "a directory above it is now a mount point"}, nil
	case ParentLink:
		if created(parent, selected) {
			return NameAt{Presence: Absent}, nil, nil // the link goes first, then the directory is made
		}
		return cur, &Conflict{Path: rel, Kind: KindSymlink, Detail: "a directory above it is now a symlink"}, nil
	}
	// The directory above is gone or is no longer one.
	if created(parent, selected) || ch.New == nil {
		return NameAt{Presence: Absent}, nil, nil // it is made by this change set, or gone with it
	}
	if cur.Presence == NoParent {
		return cur, &Conflict{Path: rel, Kind: KindDeleted, Detail: "its directory was removed outside the stage"}, nil
	}
	return cur, &Conflict{Path: rel, Kind: KindTypeChanged, Detail: "a directory above it is no longer a directory"}, nil
}

// checkEmptied refuses the removal of a directory that holds anything the
// base did not have (or that is not removed by this change set).
func (c *casReader) checkEmptied(dir string, selected map[string]*tree.Change) *Conflict {
	d, err := c.root.OpenDir(dir)
	if err != nil {
		return &Conflict{Path: dir, Kind: KindTypeChanged, Detail: err.Error()}
	}
	defer d.Close()
	names, err := d.ReadDir()
	if err != nil {
		return &Conflict{Path: dir, Kind: KindModified, Detail: err.Error()}
	}
	for _, n := range names {
		p := dir + "/" + n
		ch, ok := selected[p]
		if !ok || ch.Old == nil || (ch.New != nil && ch.New.Type == ch.Old.Type) {
			// The conflict is the directory's, the path of the change set
			// it blocks (as an apply's rmdir and recovery name it): its
			// repairs exclude or rebase that path, never the newcomer,
			// which no change names.
			return &Conflict{Path: dir, Kind: KindAddedInsideDeletedDir,
				Detail: fmt.Sprintf("the stage deletes %s but %s is in it and was not there when the stage opened (or is not part of the stage)", quote.Path(dir), quote.Path(p))}
		}
	}
	return nil
}

// modeOnly reports whether c changes only a regular file's permission bits.
func modeOnly(c tree.Change) bool {
	return c.Old != nil && c.New != nil && c.Old.Type == tree.File && c.New.Type == tree.File &&
		c.Old.Digest == c.New.Digest && c.Old.Perm != c.New.Perm
}

// created reports whether dir is made by this change set (an added
// directory or a path that becomes one).
func created(dir string, selected map[string]*tree.Change) bool {
	for p := dir; p != "."; p = tree.Parent(p) {
		if c, ok := selected[p]; ok && c.New != nil && c.New.Type == tree.Dir && (c.Old == nil || c.Old.Type != tree.Dir) {
			return true
		}
	}
	return false
}

// describeConflict names how a path that holds neither side of c differs.
func describeConflict(c tree.Change, cur NameAt) Conflict {
	cf := Conflict{Path: c.Path, Base: sideDigest(c.Old), Current: cur.String()}
	switch {
	case c.Old == nil:
		cf.Kind = KindCreated
	case !cur.Found():
		cf.Kind = KindDeleted
	case cur.Entry.Type != c.Old.Type:
		cf.Kind = KindTypeChanged
	default:
		cf.Kind = KindModified
	}
	return cf
}

// sideDigest renders an entry for a conflict's Base or Current field.
func sideDigest(e *tree.Entry) string {
	if e == nil {
		return "absent"
	}
	switch e.Type {
	case tree.File:
		return e.Digest
	case tree.Symlink:
		return "symlink:" + e.Target
	case tree.Dir:
		return fmt.Sprintf("dir:%04o", e.Perm)
	}
	return e.Type.String()
}
