package engine

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file writes the temporary files of an op and removes what it
// moved aside once it commits.

// prepareTemps writes the new content of every file and symlink the plan
// writes under its temporary name before any step runs, in every directory
// that exists already, and makes them durable together. Steps whose
// directory the plan creates (or opens to its owner) make their own
// temporary file when they run (see land). The files are written by a few
// workers, a directory at a time each, which resolves the directory once:
// creating a file is, on many file systems, kernel time that spreads over
// the cores.
func (x *executor) prepareTemps(recs []journal.Record) error {
	x.pretemps = map[string]string{}
	// Directories the plan makes, or opens to their owner in its first
	// steps, cannot take a temporary file before the steps run.
	made := map[string]bool{}
	for _, r := range recs {
		if r.Step.Kind == tree.StepMkdir || r.Step.Opens() {
			made[r.Step.Path] = true
		}
	}
	inNewDir := func(p string) bool {
		for d := tree.Parent(p); ; d = tree.Parent(d) {
			if made[d] {
				return true
			}
			if d == "." {
				return false
			}
		}
	}
	var (
		jobs  []tempJob
		files []string
	)
	for _, r := range recs {
		if (r.Step.Kind != tree.StepWrite && r.Step.Kind != tree.StepSymlink) || inNewDir(r.Step.Path) {
			continue
		}
		jobs = append(jobs, tempJob{path: r.Step.Path, e: r.Step.New, prefix: r.Tmp, done: func(tmp string) {
			x.pretemps[r.Tmp] = tmp
			if r.Step.Kind == tree.StepWrite {
				files = append(files, tree.Parent(r.Step.Path)+"\x00"+tmp)
			}
		}})
	}
	if _, err := x.writeTemps(context.Background(), jobs, "apply:temp-prepared"); err != nil {
		return err // what was prepared is in pretemps: dropPretemps removes it
	}
	return syncFiles(x.root, files)
}

// tempJob is one temporary file to write: e under a fresh name starting
// with prefix, in the directory of path; done hears the name once the file
// is written.
type tempJob struct {
	path, prefix string
	e            *tree.Entry
	done         func(tmp string)
}

// writeTemps writes the temporary file of each job, unsynced: the jobs of
// one directory by one goroutine (see workers), which opens the directory
// once. Each written file passes the failpoint point. It stops at the first
// failure (or once ctx ends) and returns it with its job's path; done has
// been called, one call at a time, for every file written until then.
func (x *executor) writeTemps(ctx context.Context, jobs []tempJob, point string) (string, error) {
	var batches [][]tempJob
	at := map[string]int{}
	for _, j := range jobs {
		dir := tree.Parent(j.path)
		i, ok := at[dir]
		if !ok {
			i = len(batches)
			at[dir] = i
			batches = append(batches, nil)
		}
		batches[i] = append(batches[i], j)
	}
	var (
		mu        sync.Mutex
		firstErr  error
		firstPath string
	)
	failed := func(path string, err error) error {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr, firstPath = err, path
		}
		return err
	}
	w := StartWorkers(ctx, len(batches))
	for _, batch := range batches {
		run := func() error {
			d, err := x.root.OpenDir(tree.Parent(batch[0].path))
			if err != nil {
				return failed(batch[0].path, err)
			}
			defer d.Close() // a directory handle: the files are written and closed
			for _, j := range batch {
				tmp, err := x.writeTemp(d, j.e, j.prefix, false)
				if err != nil {
					return failed(j.path, err)
				}
				mu.Lock()
				j.done(tmp)
				mu.Unlock()
				hit(point)
			}
			return nil
		}
		if !w.Do(run, nil) {
			break
		}
	}
	err := w.Wait()
	if firstErr != nil {
		return firstPath, firstErr
	}
	return "", err // the end of ctx, or nil
}

// dropPretemps removes the prepared temporary files no step consumed. It
// reports whether every one is gone.
func (x *executor) dropPretemps(recs []journal.Record) bool {
	clean := true
	dirs := fsx.NewDirCache(x.root)
	defer dirs.Close()
	for _, r := range recs {
		tmp, ok := x.pretemps[r.Tmp]
		if !ok {
			continue
		}
		d, err := dirs.Open(tree.Parent(r.Step.Path))
		if err != nil {
			// The directory is not reachable as one (replaced by a link,
			// moved away): the file may still be in it, wherever it went,
			// and only the journal's recovery finds it once it is back.
			clean = false
			continue
		}
		if err := d.Unlink(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			clean = false
		}
	}
	x.pretemps = nil
	return clean
}

// cleanup removes the pre-images moved aside during execute; it runs once
// the op is committed (their content is in the blob store). Each directory
// is opened once, whatever number of pre-images it holds, and a few
// directories are emptied at once: freeing a file's blocks is the kernel's
// work, done on as many processors as ask. It reports whether every one is
// gone and synced; if not, the committed journal is kept so that recovery
// finishes the cleanup.
func (x *executor) cleanup() bool {
	var order []string
	byDir := map[string][]*trashItem{}
	for _, t := range x.trash {
		if !t.live {
			continue
		}
		if _, ok := byDir[t.dir]; !ok {
			order = append(order, t.dir)
		}
		byDir[t.dir] = append(byDir[t.dir], t)
	}
	var left atomic.Bool
	_ = fsx.Each(len(order), maxWorkers, func(i int) error { // never fails: left says what stayed
		if !x.emptyTrash(order[i], byDir[order[i]]) {
			left.Store(true)
		}
		return nil
	})
	// The removals are durable before the journal goes.
	if err := syncDirs(x.root, order); err != nil {
		return false
	}
	return !left.Load()
}

// emptyTrash removes the pre-images items moved aside in dir and reports
// whether all of them are gone.
func (x *executor) emptyTrash(dir string, items []*trashItem) bool {
	d, err := x.root.OpenDir(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	clean := true
	for _, t := range items {
		// A pre-image moved aside is a file or a symlink; a directory
		// (which unlink refuses) is looked at only then.
		err := removeOpening(d, t.name, d.Unlink)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			if st, serr := d.Lstat(t.name); serr == nil && st.Mode.IsDir() {
				err = removeOpening(d, t.name, d.Rmdir)
			}
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			clean = false
		}
		hit("apply:cleanup")
	}
	return clean
}

// removeOpening removes name from d with remove. A directory the op itself
// closed to its owner (read-only, made so by its last steps) refuses an
// ordinary user's removal of wtx's own temporary names in it: then the
// directory gets its owner's write and search bits for the removal and its
// mode back after it. (A crash in between leaves those bits; the recovery
// that finishes the op puts the mode its journal recorded back.)
func removeOpening(d *fsx.Dir, name string, remove func(string) error) error {
	return opening(d, func() error { return remove(name) })
}

// opening runs change, a change of d's entries; when d's mode refuses it
// for want of the owner's write and search bits (a directory an op closed),
// it runs it again with those bits added for the while, and puts d's mode
// back after it.
func opening(d *fsx.Dir, change func() error) error {
	err := change()
	if !errors.Is(err, fs.ErrPermission) || failpoint.Disabled("open-to-clean") {
		return err
	}
	perm, perr := d.Perm()
	if perr != nil || perm&0o300 == 0o300 {
		return err // not for want of the owner's bits
	}
	if err := d.SetPerm(perm | 0o300); err != nil {
		return err
	}
	err = change()
	return errors.Join(err, d.SetPerm(perm))
}

// restoreEntry recreates a removed file or symlink from its pre-image (a
// file's content comes from the blob store), under a temporary name that
// starts with prefix (restorePrefixOf) until it is in place.
func restoreEntry(blobs *blob.Store, d *fsx.Dir, name string, old *tree.Entry, prefix string) error {
	tmp, err := writeTemp(blobs, d, old, prefix, true)
	if err != nil {
		return err
	}
	if err := d.RenameNoReplace(tmp, d, name); err != nil {
		_ = d.Unlink(tmp) // best effort: recovery removes restore- leftovers
		return err
	}
	return nil
}

// writeTemp is the package's writeTemp, with the content of a payload
// the apply holds in memory taken from there (x.held).
func (x *executor) writeTemp(d *fsx.Dir, e *tree.Entry, prefix string, durable bool) (string, error) {
	if x.held == nil || e.Type != tree.File {
		return writeTemp(x.blobs, d, e, prefix, durable)
	}
	data, ok := x.held(blob.Digest(e.Digest))
	if !ok {
		return writeTemp(x.blobs, d, e, prefix, durable)
	}
	return writeTempFrom(d, e, prefix, durable, func(f *fsx.File) error { return f.WriteAt(data, 0) })
}

// writeTemp writes e (a file's blob, or a symlink) under a fresh temporary
// name in d, synced when durable, and returns the name.
func writeTemp(blobs *blob.Store, d *fsx.Dir, e *tree.Entry, prefix string, durable bool) (string, error) {
	// The content is checked against its digest as it is copied: a
	// damaged blob never lands (the temporary file goes below).
	return writeTempFrom(d, e, prefix, durable, func(f *fsx.File) error {
		_, err := blobs.CopyToFile(context.Background(), f, blob.Digest(e.Digest))
		return err
	})
}

// writeTempFrom writes e under a fresh temporary name in d, a file's
// content with fill, synced when durable, and returns the name.
func writeTempFrom(d *fsx.Dir, e *tree.Entry, prefix string, durable bool, fill func(*fsx.File) error) (string, error) {
	if e.Type == tree.Symlink {
		tmp := prefix + "l"
		if err := d.Symlink(e.Target, tmp); err != nil {
			return "", err
		}
		return tmp, nil
	}
	// Made with its permission bits when the umask leaves them whole,
	// else private until its fchmod.
	perm := fs.FileMode(e.Perm)
	exact := fsx.ExactPerm(perm)
	made := perm
	if !exact {
		made = 0o600
	}
	f, tmp, err := d.CreateTempFile(prefix, made)
	if err != nil {
		return "", err
	}
	err = fill(f)
	if err == nil && !exact {
		err = f.Chmod(perm)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.Unlink(tmp) // best effort: the caller reports err
		return "", err
	}
	return tmp, nil
}
