package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// reclose gives back its recorded mode to each directory of a committed op
// that holds it but for the owner's write and search bits: what a cleanup
// cut short left when it had opened the directory to remove wtx's names in
// it (see removeOpening). A directory in any other state is left alone.
func reclose(root *fsx.Root, recs []journal.Record) []error {
	var errs []error
	for _, r := range recs {
		if r.Step.Kind != tree.StepDirPerm || r.Step.New == nil {
			continue
		}
		want := fs.FileMode(r.Step.New.Perm).Perm()
		if want&0o300 == 0o300 {
			continue // never closed: nothing was opened
		}
		d, err := root.OpenDir(r.Step.Path)
		if err != nil {
			continue // gone or replaced since: not ours to change
		}
		cur, err := d.Perm()
		if err == nil && cur.Perm() != want && cur.Perm()&^0o300 == want&^0o300 {
			if err = d.SetPerm(cur&^fs.ModePerm | want); err == nil {
				err = d.Sync() // before the journal goes
			}
		}
		d.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
		}
	}
	return errs
}

// RollBack puts every path of the uncommitted op j back to its pre-image,
// newest step first. Each record is judged by what the workspace holds now,
// so a crash at any point (of the op or of an earlier recovery) is handled
// the same way. A path changed since the op is never overwritten: it is an
// ErrInterrupted, unless keepExternal, which keeps it as it is and returns
// it. A step that fails is reported with all the others that fail
// (ErrStepsFailed); the journal then stays. RollBack does not remove the
// journal.
func (s *Store) RollBack(ctx context.Context, j *journal.Journal, keepExternal bool) ([]Conflict, error) {
	rb := &rollbacker{root: s.Root, blobs: s.Blobs, temps: newTempIndex(j.Records)}
	conflicts, errs, err := rb.undoAll(ctx, j, keepExternal, s.progress(PhaseRecover))
	if err != nil {
		return nil, err
	}
	// The directories whose entries moved are synced before the journal
	// goes. A temporary name left behind (its removal failed) or a failed
	// sync keeps the journal, so the next recovery does it again: an fsync
	// error is never trusted.
	dirs, byDir := recordsByDir(j.Records)
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := s.Root.OpenDir(dir)
		if err != nil {
			if !gone(err) {
				errs = append(errs, fmt.Errorf("%s: %w", quote.Path(dir), err))
			}
			continue // otherwise the directory was removed by the rollback
		}
		errs = append(errs, rb.finishDir(d, byDir[dir])...)
		d.Close()
	}
	if len(errs) > 0 {
		return nil, stepsFailed(j.OpID, "roll back", errs)
	}
	return conflicts, nil
}

// undoAll undoes j's records, newest first: it returns the paths kept as
// changed since (keepExternal) and the steps that failed; a path changed
// since without keepExternal stops it with ErrInterrupted.
func (rb *rollbacker) undoAll(ctx context.Context, j *journal.Journal, keepExternal bool, progress func(i, n int)) ([]Conflict, []error, error) {
	// A path whose type changes is removed by one record and built again
	// by later ones; until the removal runs it still holds its pre-image.
	removed := map[string]int{}
	for i, r := range j.Records {
		if _, ok := removed[r.Step.Path]; !ok && (r.Step.Kind == tree.StepRemove || r.Step.Kind == tree.StepRmdir) {
			removed[r.Step.Path] = i
		}
	}
	var conflicts []Conflict
	var errs []error
	for i := len(j.Records) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		r := j.Records[i]
		var orig *tree.Entry
		if k, ok := removed[r.Step.Path]; ok && k < i {
			orig = j.Records[k].Step.Old
		}
		cf, err := rb.undo(r, orig)
		if progress != nil {
			progress(len(j.Records)-i, len(j.Records))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
			continue
		}
		if cf != nil {
			if !keepExternal {
				return nil, nil, &Error{Kind: ErrInterrupted, OpID: j.OpID, Conflicts: []Conflict{*cf},
					Msg: fmt.Sprintf("an apply (%s) was interrupted and %s changed since; wtx will not overwrite it", j.OpID, quote.Path(cf.Path))}
			}
			conflicts = append(conflicts, *cf)
			if err := rb.dropTemps(r); err != nil {
				errs = append(errs, fmt.Errorf("%s: remove temporary files: %w", quote.Path(r.Step.Path), err))
			}
		}
		hit("recover:undone")
	}
	return conflicts, errs, nil
}

// dropTemps removes what record r left under its temporary names, its path
// being kept as it was changed (its pre-images are in the blob store).
func (rb *rollbacker) dropTemps(r journal.Record) error {
	d, err := rb.root.OpenDir(tree.Parent(r.Step.Path))
	if err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	defer d.Close()
	return rb.removeTemps(d, r.Tmp)
}

// finishDir removes what recs (the records of directory d) left in d
// under temporary names once their paths are back to their pre-images,
// checks none is left, and syncs d. It reads d twice, however many records
// it holds.
func (rb *rollbacker) finishDir(d *fsx.Dir, recs []journal.Record) []error {
	var errs []error
	names, err := d.ReadDir()
	if err != nil {
		return []error{fmt.Errorf("list %s: %w", quote.Path(d.Rel()), err)}
	}
	ours := map[string]bool{rb.temps.restore: true}
	for _, r := range recs {
		ours[r.Tmp] = true
	}
	byPrefix := rb.temps.group(names)
	// A failed restore may leave its temporary file, and a path back to
	// its pre-image may still have the record's: both are garbage now.
	if err := removeNames(d, byPrefix[rb.temps.restore]); err != nil {
		errs = append(errs, err)
	}
	for _, r := range recs {
		at, err := entryIn(context.Background(), d, r.Step.Path, tree.Base(r.Step.Path), ContentReader{})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
		} else if at.Holds(r.Step.Old) {
			if err := removeNames(d, byPrefix[r.Tmp]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	names, err = d.ReadDir()
	if err != nil {
		return append(errs, fmt.Errorf("list %s: %w", quote.Path(d.Rel()), err))
	}
	var left []string
	for p, ns := range rb.temps.group(names) {
		if ours[p] {
			left = append(left, ns...)
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		errs = append(errs, fmt.Errorf("temporary names left in %s: %v", quote.Path(d.Rel()), left))
	}
	// A mode put back in place is the object's own change: its parent's
	// fsync does not carry it.
	for _, r := range recs {
		if r.Step.Kind == tree.StepChmod || r.Step.Kind == tree.StepDirPerm {
			if err := rb.syncObject(d, tree.Base(r.Step.Path), r.Step.Kind == tree.StepDirPerm); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
			}
		}
	}
	if err := d.Sync(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// syncObject makes the inode at name in d durable, a directory when dir:
// an fsync of it, or where its mode denies this process opening it, of
// the whole file system. A name gone or of another type since is left:
// the rollback reports what it found there.
func (rb *rollbacker) syncObject(d *fsx.Dir, name string, dir bool) error {
	err := syncEntry(d, name, dir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return syncEverything(rb.root)
	case gone(err), errors.Is(err, fsx.ErrNotDir), errors.Is(err, fsx.ErrSymlink), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		return nil
	}
	return err
}

// recordsByDir groups recs by the directory of their path, directories in
// the order they first appear.
func recordsByDir(recs []journal.Record) ([]string, map[string][]journal.Record) {
	var dirs []string
	byDir := map[string][]journal.Record{}
	for _, r := range recs {
		dir := tree.Parent(r.Step.Path)
		if _, ok := byDir[dir]; !ok {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], r)
	}
	return dirs, byDir
}

// restorePrefixOf is the start of the temporary name of a pre-image that
// the rollback of an op restores, given the prefix of one of the op's
// records (".wtx-tmp-<op>-<i>-"): ".wtx-tmp-<op>-restore-", the op's own,
// so that recovery removes only names its op made and never a workspace
// file whose name merely starts with .wtx-tmp-restore- (a file a person
// or a repository put there, which no op recorded).
//
// WTX_DISABLE=restore-prefix (failpoint build) uses the one prefix
// ".wtx-tmp-restore-" of every op: the negative control of its test.
func restorePrefixOf(recTmp string) string {
	op, _, ok := strings.Cut(strings.TrimPrefix(recTmp, tempPrefix), "-")
	if !ok || op == "" || failpoint.Disabled("restore-prefix") {
		return tempPrefix + "restore-"
	}
	return tempPrefix + op + "-restore-"
}

// tempIndex finds a journal's temporary names in the workspace. Each
// directory is listed once, the first time a record of it asks, and its
// temporary names are filed under the record prefix they carry (a
// directory of 20,000 records is read once, not 20,000 times). Recovery
// never makes a name with a record's prefix, so while it runs a name can
// only go away: a listed name may be gone (every use of one tolerates
// that), but none is missing. The final check of each directory
// (finishDir) reads it afresh.
//
// WTX_DISABLE=recover-index (failpoint build) lists the directory again
// for every record: the negative control of the recovery-scale test.
type tempIndex struct {
	prefixes map[string]bool                // every record's Tmp, and restore
	restore  string                         // the op's restorePrefixOf
	dirs     map[string]map[string][]string // directory → prefix → names
}

func newTempIndex(recs []journal.Record) *tempIndex {
	ti := &tempIndex{dirs: map[string]map[string][]string{}}
	if len(recs) > 0 {
		ti.restore = restorePrefixOf(recs[0].Tmp)
		ti.prefixes = map[string]bool{ti.restore: true}
	} else {
		ti.prefixes = map[string]bool{}
	}
	for _, r := range recs {
		if r.Tmp != "" {
			ti.prefixes[r.Tmp] = true
		}
	}
	return ti
}

// prefixOf returns the record prefix name starts with, if any: the
// shortest one ending in '-' (record prefixes end in '-' and none is
// another's prefix).
func (ti *tempIndex) prefixOf(name string) (string, bool) {
	if !strings.HasPrefix(name, tempPrefix) {
		return "", false
	}
	for i := len(tempPrefix); i < len(name); i++ {
		if name[i] == '-' && ti.prefixes[name[:i+1]] {
			return name[:i+1], true
		}
	}
	return "", false
}

// group files names under the record prefixes they carry.
func (ti *tempIndex) group(names []string) map[string][]string {
	out := map[string][]string{}
	for _, n := range names {
		if p, ok := ti.prefixOf(n); ok {
			out[p] = append(out[p], n)
		}
	}
	return out
}

// of returns the names in d that carry prefix (a record's Tmp).
func (ti *tempIndex) of(d *fsx.Dir, prefix string) ([]string, error) {
	if failpoint.Disabled("recover-index") {
		return tempsWithPrefix(d, prefix)
	}
	byPrefix, ok := ti.dirs[d.Rel()]
	if !ok {
		names, err := d.ReadDir()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", quote.Path(d.Rel()), err)
		}
		byPrefix = ti.group(names)
		ti.dirs[d.Rel()] = byPrefix
	}
	return byPrefix[prefix], nil
}

// forget drops prefix's names in d from the index once they are gone.
func (ti *tempIndex) forget(d *fsx.Dir, prefix string) {
	if byPrefix, ok := ti.dirs[d.Rel()]; ok {
		delete(byPrefix, prefix)
	}
}

// gone reports whether err says a directory is not there (any more) or is
// not a directory (a file, or a symbolic link, which wtx never follows):
// nothing of a record can remain in it.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrNotDir) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fsx.ErrSymlink)
}

// tempsWithPrefix lists d's entries whose names start with prefix.
func tempsWithPrefix(d *fsx.Dir, prefix string) ([]string, error) {
	names, err := d.ReadDir()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", quote.Path(d.Rel()), err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

// removeNames unlinks names from d; a name already gone is fine.
func removeNames(d *fsx.Dir, names []string) error {
	var errs []error
	for _, n := range names {
		if err := removeOpening(d, n, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", quote.Path(n), err))
		}
	}
	return errors.Join(errs...)
}

// removeTemps deletes what the committed records recs, all of directory
// dir, left under their temporary names: moved-aside pre-images and unused
// temporary files. It reads the directory once to find them and once to
// check none is left, and syncs it.
func removeTemps(root *fsx.Root, dir string, recs []journal.Record) error {
	d, err := root.OpenDir(dir)
	if err != nil {
		if gone(err) {
			return nil // the directory is gone, and its temporary names with it
		}
		return err
	}
	defer d.Close()
	ti := newTempIndex(recs)
	delete(ti.prefixes, ti.restore) // not a record's: a roll forward leaves those alone
	find := func() ([]string, error) {
		names, err := d.ReadDir()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", quote.Path(d.Rel()), err)
		}
		var ours []string
		for _, n := range names {
			if _, ok := ti.prefixOf(n); ok {
				ours = append(ours, n)
			}
		}
		return ours, nil
	}
	names, err := find()
	if err != nil || len(names) == 0 {
		return err
	}
	rmErr := removeNames(d, names)
	left, err := find()
	if err != nil {
		return errors.Join(rmErr, err)
	}
	if len(left) > 0 {
		return errors.Join(rmErr, fmt.Errorf("temporary names left in %s: %v", quote.Path(d.Rel()), left))
	}
	return d.Sync()
}

// RollForward finishes the workspace's side of the committed op j: what it
// moved aside and what it left under its temporary names goes, and each
// directory a cut-short cleanup opened gets its recorded mode back. The
// caller then records the op, settles it and removes the journal. A step
// that fails is reported with every other (ErrStepsFailed): the journal
// stays, and the next recovery tries again.
func (s *Store) RollForward(ctx context.Context, j *journal.Journal) error {
	var errs []error
	var left []journal.Record
	for _, r := range j.Records {
		if (r.Step.Kind == tree.StepRemove && !r.Unlink) || r.Step.Kind == tree.StepWrite || r.Step.Kind == tree.StepSymlink {
			left = append(left, r)
		}
	}
	// One directory at a time: each is read, cleaned and synced once,
	// whatever number of records it holds.
	dirs, byDir := recordsByDir(left)
	progress := s.progress(PhaseRecover)
	done := 0
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := removeTemps(s.Root, dir, byDir[dir]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(dir), err))
		}
		done += len(byDir[dir])
		if progress != nil {
			progress(done, len(left))
		}
		hit("recover:forward-cleanup")
	}
	errs = append(errs, reclose(s.Root, j.Records)...)
	if len(errs) > 0 {
		// The journal stays: the next recovery removes them.
		return stepsFailed(j.OpID, "finish", errs)
	}
	return nil
}

// TempPrefix starts the name of every temporary file the engine makes in a
// workspace directory while it applies.
const TempPrefix = tempPrefix

// FindTemps lists (relative paths of) up to limit entries of the workspace
// at root named like the engine's temporary files: evidence that an op
// touched the workspace. Symbolic links are not followed.
func FindTemps(root string, limit int) []string {
	var out []string
	// The walk's own error is never returned: the function below
	// swallows each one.
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory holds no evidence we can see
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			rel, _ := filepath.Rel(root, p) // p is under root: Rel cannot fail
			out = append(out, rel)
			if len(out) >= limit {
				return filepath.SkipAll
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return out
}
