package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// ApplyResult reports an apply.
type ApplyResult struct {
	// OpID names the op that was recorded; "" when nothing was written.
	OpID string
	// Changes are the selected changes (including those already in place).
	Changes []Change
	// Written lists the paths this apply changed, sorted.
	Written []string
	// AlreadyApplied lists selected paths that already held their staged
	// state, and so were left alone.
	AlreadyApplied []string
	// ChangesetDigest and Counts describe the selection.
	ChangesetDigest string
	Counts          Counts
	// DryRun is set when nothing was written on purpose.
	DryRun bool
	// Settled is set when the stage's whole change set has now landed.
	Settled bool
	// Receipt is the apply's receipt (nil for a dry run).
	Receipt *Receipt
	// AppliedIn names the earlier ops of the stage that already applied
	// what was selected: of a settled stage, or of path selectors that
	// match nothing staged any more but paths those ops wrote.
	AppliedIn []string
}

// testHookStep, when set by a test, runs before each plan step; an error
// makes that step fail.
var testHookStep func(i int, st tree.Step) error

// testHookStored, when set by a test, runs once the apply's blobs are
// stored, before the journal is written.
var testHookStored func()

// tempPrefix starts the name of every temporary file wtx makes in a
// workspace directory while it applies.
const tempPrefix = stage.TempPrefix

// Apply folds the selected part of the change set onto the workspace, all
// or nothing. The checks run in this order, and the first that fails refuses
// the whole apply with nothing written: the stage's state
// (refusal.dropped), the selection's boundary (refusal.boundary), the
// review digest (refusal.changed-since-review), special files
// (precondition.special-file), protected selectors (refusal.protected),
// staged files sharing an inode with the workspace (refusal.boundary), and
// every selected path against the base (refusal.target-changed, or
// refusal.boundary when a symlink stands in the way). Paths that already
// hold their staged state are left alone, so applying again is a no-op.
// With opts.Hunks, a text file lands with only its chosen hunks; the rest of
// it stays staged.
//
// A stage that a run holds is refused (refusal.stage-busy). A stage whose
// whole change set is empty settles as StateEmpty.
func (s *Stage) Apply(ctx context.Context, opts ApplyOptions) (res *ApplyResult, err error) {
	if _, err := parsePaths(opts.Paths); err != nil {
		return nil, err
	}
	if res, done, err := s.applySettled(ctx); done {
		return res, err
	}
	release, err := s.holdShared(ctx, "apply")
	if err != nil {
		return nil, err
	}
	defer release()
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have settled or dropped the stage meanwhile.
	if err := s.reload(ctx); err == nil {
		if res, done, err := s.applySettled(ctx); done {
			return res, err
		}
	}
	return s.apply(ctx, opts)
}

// applySettled answers an apply of a settled stage: a dropped one is
// refused, an applied or empty one has nothing left to apply.
func (s *Stage) applySettled(ctx context.Context) (*ApplyResult, bool, error) {
	switch s.row.State {
	case StateDropped:
		return nil, true, s.checkUsable()
	case StateApplied, StateEmpty:
		return &ApplyResult{ChangesetDigest: tree.ChangesetDigest(nil), Settled: true, AppliedIn: s.appliedOps(ctx)}, true, nil
	}
	return nil, false, nil
}

// apply is Apply on an open stage, with the busy and workspace locks held.
func (s *Stage) apply(ctx context.Context, opts ApplyOptions) (res *ApplyResult, err error) {
	cs, err := s.SelectChanges(ctx, Selection{Paths: opts.Paths, Exclude: opts.Exclude})
	if err != nil {
		return nil, err
	}
	res = &ApplyResult{Changes: cs.Changes, ChangesetDigest: cs.Digest, Counts: cs.Counts, DryRun: opts.DryRun}
	defer func() {
		if err != nil && !opts.DryRun {
			if e := AsError(err); e.ExitCode() == 2 {
				s.ws.recordRefusal(ctx, s, cs, opts, e)
			}
		}
	}()
	if opts.Expect != "" && opts.Expect != cs.Digest {
		return nil, &Error{Code: CodeChangedSinceReview,
			Message: fmt.Sprintf("the selected change set of %s changed since it was reviewed (expected %s, now %s)", s.ID(), opts.Expect, cs.Digest),
			Repairs: []Repair{{Action: "review", Detail: "look at the change set again", Command: "wtx diff " + s.ID()}}}
	}
	// A selector that matches nothing is an error, unless what it names
	// was applied already (checked after --expect: what was reviewed is
	// the first question).
	if res.AppliedIn, err = s.appliedIn(ctx, cs); err != nil {
		return nil, err
	}
	var partial map[string]bool
	if len(opts.Hunks) > 0 {
		narrowed, p, err := s.narrowHunks(ctx, cs, opts.Hunks)
		if err != nil {
			return nil, err
		}
		cs, partial = narrowed, p
		res.Changes, res.ChangesetDigest, res.Counts = cs.Changes, cs.Digest, cs.Counts
	}
	if len(cs.Special) > 0 {
		return nil, specialError(s, cs.Special)
	}
	for i := range cs.changes {
		if reservedPath(cs.changes[i].Path) {
			return nil, reservedApplyError(s.ID(), cs)
		}
		if err := fsx.ValidRel(cs.changes[i].Path); err != nil {
			return nil, &Error{Code: CodeBoundary, Message: err.Error(),
				Conflicts: []Conflict{{Path: cs.changes[i].Path, Kind: "boundary", Detail: err.Error()}}}
		}
	}
	if !opts.Approve {
		var prot []string
		for i := range cs.changes {
			if s.protect.Match(cs.changes[i].Path) || gitPath(cs.changes[i].Path) {
				prot = append(prot, cs.changes[i].Path)
			}
		}
		if len(prot) > 0 {
			return nil, s.protectedError(prot)
		}
	}
	if len(cs.changes) == 0 {
		if len(opts.Paths) == 0 && len(opts.Exclude) == 0 && len(opts.Hunks) == 0 && !opts.DryRun && len(cs.all) == 0 && len(cs.Special) == 0 {
			// Nothing is staged at all: the stage settles. One whose
			// earlier applies landed everything is applied, else empty.
			state := StateEmpty
			if len(s.cfg.Ops) > 0 {
				state = StateApplied
			}
			if err := s.settle(ctx, state); err != nil {
				return nil, err
			}
			res.Settled = true
		}
		return res, nil
	}
	root, err := fsx.OpenRoot(s.ws.path)
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	a := &applier{ws: s.ws, root: root, base: cs.base, ident: map[string]fsx.Stat{}, partial: partial, batch: s.ws.blobs.NewBatch(), progress: opts.Progress}
	// Payloads and pre-images go into the blob store as one batch, made
	// durable (and visible) before the journal is written.
	committed := false
	defer func() {
		if !committed {
			a.batch.Abort()
		}
	}()
	if err := a.payloads(ctx, s, cs.changes); err != nil {
		return nil, err
	}
	todo, already, conflicts, err := a.check(ctx, cs.changes)
	if err != nil {
		return nil, err
	}
	if len(conflicts) > 0 {
		return nil, conflictError(s, conflicts)
	}
	if !opts.IgnoreStaleReads {
		stale, err := s.staleReads(ctx, root, cs.all)
		if err != nil {
			return nil, err
		}
		if len(stale) > 0 {
			return nil, staleReadError(s, stale)
		}
	}
	for _, c := range already {
		res.AlreadyApplied = append(res.AlreadyApplied, c.Path)
	}
	for _, c := range todo {
		res.Written = append(res.Written, c.Path)
	}
	if opts.DryRun || len(todo) == 0 {
		if len(todo) == 0 && !opts.DryRun {
			if err := s.advanceBase(ctx, cs, already); err != nil {
				return nil, err
			}
			res.Settled = s.row.State == StateApplied
		}
		return res, nil
	}
	if err := a.batch.Commit(); err != nil {
		return nil, AsError(err)
	}
	committed = true
	if testHookStored != nil {
		testHookStored()
	}
	opID := newID("op", s.ws.now())
	rec, err := s.opRecord(opID, cs, opts, res, todo, already)
	if err != nil {
		return nil, err
	}
	// Settling runs past the commit marker: an interrupt does not stop it.
	settle := func() error { return s.advanceBase(context.WithoutCancel(ctx), cs, slices.Concat(todo, already)) }
	if err := s.ws.commitOp(ctx, a, rec, todo, settle); err != nil {
		return nil, err
	}
	res.OpID = opID
	res.Settled = s.row.State == StateApplied
	res.Receipt = &rec.Receipt
	return res, nil
}

func conflictError(s *Stage, conflicts []Conflict) *Error {
	code := CodeTargetChanged
	for _, c := range conflicts {
		if c.Kind == "symlink" || c.Kind == "shared-inode" || c.Kind == "boundary" {
			code = CodeBoundary
		}
	}
	msg := fmt.Sprintf("%d path(s) changed outside %s since it opened; first: %s (%s)", len(conflicts), s.ID(), quote.Path(conflicts[0].Path), conflicts[0].Kind)
	if code == CodeBoundary {
		msg = fmt.Sprintf("apply of %s would leave the workspace or write through a link: %s (%s)", s.ID(), quote.Path(conflicts[0].Path), conflicts[0].Kind)
	}
	repairs := driftRepairs(s, conflicts)
	if code == CodeBoundary {
		repairs = repairs[2:]
	}
	return &Error{Code: code, Message: msg, Conflicts: conflicts, Repairs: repairs}
}

// applier carries one apply's state.
type applier struct {
	ws   *Workspace
	root *fsx.Root
	base *tree.Manifest
	// ident holds, per path, the workspace object the check phase saw: the
	// execute phase verifies it is the one it displaces.
	ident map[string]fsx.Stat
	trash []trashItem
	// rmdirs holds the directories the plan removes: what is moved aside
	// inside them is unlinked at once (it would keep them from going).
	rmdirs map[string]bool
	// readOnly makes the check phase hash instead of storing pre-images,
	// and trust a stat tuple that proves a file unchanged (status).
	readOnly bool
	// pretemps maps a record's temporary prefix to the temporary file made
	// for it before the steps ran (see prepareTemps).
	pretemps map[string]string
	// progress reports steps done (ApplyOptions.Progress), if set.
	progress func(done, total int)
	// batch, when set, takes the blobs the apply stores until they are
	// committed together.
	batch *blob.Batch
	// partial names the paths whose payload is already in the blob store:
	// chosen hunks of a file rather than its staged content.
	partial map[string]bool
}

type trashItem struct {
	dir, name string
	live      bool
}

// payloads copies every staged file to be written into the blob store, so
// that what lands is exactly what was scanned, and checks that no staged
// file shares an inode with its workspace file.
func (a *applier) payloads(ctx context.Context, s *Stage, cs []tree.Change) error {
	v, err := s.view(ctx)
	if err != nil {
		return err
	}
	defer v.Close()
	for i := range cs {
		c := &cs[i]
		a.ws.progress(PhaseRead, i, len(cs))
		if c.New == nil || c.New.Type != tree.File || a.partial[c.Path] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := v.OpenFile(c.Path)
		if err != nil {
			return stagingError(fmt.Errorf("read staged %s: %w", c.Path, err))
		}
		fi, err := f.Stat()
		if err == nil {
			if cur, lerr := a.root.Lstat(c.Path); lerr == nil && sameInode(fi, cur) {
				f.Close()
				return conflictError(s, []Conflict{{Path: c.Path, Kind: "shared-inode",
					Detail: "the staged file is the workspace file itself (same inode); applying it would be meaningless and writing it was never staged"}})
			}
		}
		d, _, perr := a.put(ctx, f)
		f.Close()
		if err = errors.Join(err, perr); err != nil {
			return AsError(fmt.Errorf("store staged %s: %w", c.Path, err))
		}
		if string(d) != c.New.Digest {
			return &Error{Code: CodeUnstable, Message: fmt.Sprintf("staged file %s changed while it was applied; run the apply again", quote.Path(c.Path))}
		}
	}
	return nil
}

// put stores r as a blob, in the apply's batch when there is one.
func (a *applier) put(ctx context.Context, r io.Reader) (blob.Digest, int64, error) {
	if a.batch != nil {
		return a.batch.Put(ctx, r)
	}
	return a.ws.blobs.Put(ctx, r)
}

// check compares every selected path with the base and splits the changes
// into those to write, those already in place, and conflicts. Pre-images of
// files to be replaced or removed are stored as blobs on the way.
func (a *applier) check(ctx context.Context, cs []tree.Change) (todo, already []tree.Change, conflicts []Conflict, err error) {
	selected := make(map[string]*tree.Change, len(cs))
	for i := range cs {
		selected[cs[i].Path] = &cs[i]
	}
	for i := range cs {
		c := cs[i]
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		if !a.readOnly {
			a.ws.progress(PhaseCheck, i, len(cs))
		}
		cur, found, cerr := a.current(ctx, c.Path, selected)
		if cerr != nil {
			var cf *Conflict
			if errors.As(cerr, &cf) {
				conflicts = append(conflicts, *cf)
				continue
			}
			return nil, nil, nil, cerr
		}
		if failpoint.Disabled("cas") {
			todo = append(todo, c) // negative control: no compare-and-swap
			continue
		}
		switch {
		case matches(cur, found, c.Old) && modeOnly(c) && a.ident[c.Path].Nlink > 1:
			// fchmod would change the file's other hard links too, which
			// may lie outside the workspace.
			conflicts = append(conflicts, Conflict{Path: c.Path, Kind: "shared-inode",
				Detail: "a mode-only change of a file with other hard links would change them too"})
		case matches(cur, found, c.Old):
			if c.Old != nil && c.Old.Type == tree.Dir && (c.New == nil || c.New.Type != tree.Dir) {
				if cf := a.checkEmptied(c.Path, selected); cf != nil {
					conflicts = append(conflicts, *cf)
					continue
				}
			}
			todo = append(todo, c)
		case matches(cur, found, c.New):
			already = append(already, c)
		default:
			conflicts = append(conflicts, describeConflict(c, cur, found))
		}
	}
	return todo, already, conflicts, nil
}

// current reads what the workspace holds at rel now. Files are read into
// the blob store (their digest is the content check); directories that
// cannot be opened without following a symlink give a conflict.
func (a *applier) current(ctx context.Context, rel string, selected map[string]*tree.Change) (*tree.Entry, bool, error) {
	d, err := a.root.OpenDir(tree.Parent(rel))
	if err != nil {
		switch {
		case errors.Is(err, fsx.ErrSymlink):
			if created(tree.Parent(rel), selected) {
				return nil, false, nil // the link goes first, then the directory is made
			}
			return nil, false, &Conflict{Path: rel, Kind: "symlink", Detail: "a directory above it is now a symlink"}
		case errors.Is(err, fsx.ErrCrossDevice):
			return nil, false, &Conflict{Path: rel, Kind: "boundary", Detail: "a directory above it is now a mount point"}
		case errors.Is(err, fs.ErrNotExist):
			if created(tree.Parent(rel), selected) {
				return nil, false, nil
			}
			if c, ok := selected[rel]; ok && c.New == nil {
				return nil, false, nil // its directory is gone, and so is it
			}
			return nil, false, &Conflict{Path: rel, Kind: "deleted", Detail: "its directory was removed outside the stage"}
		case errors.Is(err, fsx.ErrNotDir), errors.Is(err, syscall.ENOTDIR):
			if created(tree.Parent(rel), selected) {
				return nil, false, nil
			}
			if c, ok := selected[rel]; ok && c.New == nil {
				return nil, false, nil // its directory is no longer one, and so it is gone
			}
			return nil, false, &Conflict{Path: rel, Kind: "type-changed", Detail: "a directory above it is no longer a directory"}
		}
		return nil, false, AsError(err)
	}
	defer d.Close()
	name := tree.Base(rel)
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, AsError(err)
	}
	a.ident[rel] = st
	e := &tree.Entry{Path: rel, Type: tree.TypeOf(st.Mode), Size: st.Size}
	switch e.Type {
	case tree.File:
		e.Perm = uint32(st.Mode.Perm())
		if b := a.base.Lookup(rel); a.readOnly && b != nil && b.Type == tree.File && !a.base.WSRacy(b) &&
			b.WS == (tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}) {
			e.Digest = b.Digest
			break
		}
		f, err := d.OpenFile(name)
		if err != nil {
			return nil, false, AsError(err)
		}
		var dg blob.Digest
		var n int64
		if a.readOnly {
			h := blob.NewHasher()
			n, err = io.Copy(h, f)
			dg = h.Digest()
		} else {
			dg, n, err = a.put(ctx, f)
		}
		f.Close()
		if err != nil {
			return nil, false, AsError(fmt.Errorf("store pre-image of %s: %w", rel, err))
		}
		if n != st.Size {
			return nil, false, &Conflict{Path: rel, Kind: "modified", Detail: "it is being written right now"}
		}
		e.Digest = string(dg)
	case tree.Dir:
		e.Perm = uint32(st.Mode.Perm())
	case tree.Symlink:
		t, err := d.Readlink(name)
		if err != nil {
			return nil, false, AsError(err)
		}
		e.Target = t
	}
	return e, true, nil
}

// gitPath reports whether rel is or lies under a ".git" directory, in any
// letter case and at any depth: hooks and configuration there run code, so
// such paths are protected by default.
func gitPath(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// modeOnly reports whether c changes only a regular file's permission bits.
func modeOnly(c tree.Change) bool {
	return c.Old != nil && c.New != nil && c.Old.Type == tree.File && c.New.Type == tree.File &&
		c.Old.Digest == c.New.Digest && c.Old.Perm != c.New.Perm
}

// created reports whether dir is made by this apply (an added directory or
// a path that becomes one).
func created(dir string, selected map[string]*tree.Change) bool {
	for p := dir; p != "."; p = tree.Parent(p) {
		if c, ok := selected[p]; ok && c.New != nil && c.New.Type == tree.Dir && (c.Old == nil || c.Old.Type != tree.Dir) {
			return true
		}
	}
	return false
}

// matches reports whether the workspace's current state equals e (nil: absent).
func matches(cur *tree.Entry, found bool, e *tree.Entry) bool {
	if e == nil {
		return !found
	}
	return found && tree.SameContent(cur, e)
}

// checkEmptied refuses the removal of a directory that holds anything the
// base did not have (or that is not removed by this apply).
func (a *applier) checkEmptied(dir string, selected map[string]*tree.Change) *Conflict {
	d, err := a.root.OpenDir(dir)
	if err != nil {
		return &Conflict{Path: dir, Kind: "type-changed", Detail: err.Error()}
	}
	defer d.Close()
	names, err := d.ReadDir()
	if err != nil {
		return &Conflict{Path: dir, Kind: "modified", Detail: err.Error()}
	}
	for _, n := range names {
		p := dir + "/" + n
		c, ok := selected[p]
		if !ok || c.Old == nil || (c.New != nil && c.New.Type == c.Old.Type) {
			return &Conflict{Path: p, Kind: "added-inside-deleted-dir",
				Detail: fmt.Sprintf("the stage deletes %s but %s is in it and was not there when the stage opened (or is not part of the stage)", quote.Path(dir), quote.Path(p))}
		}
	}
	return nil
}

func describeConflict(c tree.Change, cur *tree.Entry, found bool) Conflict {
	cf := Conflict{Path: c.Path, Base: sideDigest(c.Old), Current: "absent"}
	if found {
		cf.Current = sideDigest(cur)
	}
	switch {
	case c.Old == nil:
		cf.Kind = "created"
	case !found:
		cf.Kind = "deleted"
	case cur.Type != c.Old.Type:
		cf.Kind = "type-changed"
	default:
		cf.Kind = "modified"
	}
	return cf
}

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

// execute runs the plan. On any failure it undoes what it did, newest
// first, and returns the error.
func (a *applier) execute(ctx context.Context, recs []journal.Record) (err error) {
	var undo []func() error
	touched := map[string]bool{}
	defer func() {
		if err == nil {
			return
		}
		var uerrs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				uerrs = append(uerrs, uerr)
			}
		}
		if len(uerrs) > 0 {
			err = &Error{Code: CodeInternal,
				Message: fmt.Sprintf("apply failed (%v) and could not be fully undone: %v", err, errors.Join(uerrs...))}
		}
	}()
	for i, r := range recs {
		st := r.Step
		if err := ctx.Err(); err != nil {
			return err
		}
		if testHookStep != nil {
			if err := testHookStep(i, st); err != nil {
				return AsError(err)
			}
		}
		failpoint.Hit("apply:step")
		a.ws.progress(PhaseWrite, i, len(recs))
		if a.progress != nil && (i%256 == 0 || i == len(recs)-1) {
			a.progress(i+1, len(recs))
		}
		u, err := a.step(r)
		failpoint.Hit("apply:step-done")
		if err != nil {
			var cf *Conflict
			if errors.As(err, &cf) {
				return &Error{Code: CodeTargetChanged,
					Message:   fmt.Sprintf("%s changed outside the stage while it was applied (%s); nothing was written", quote.Path(cf.Path), cf.Kind),
					Conflicts: []Conflict{*cf}}
			}
			return AsError(fmt.Errorf("apply %s %s: %w", st.Kind, st.Path, err))
		}
		if u != nil {
			undo = append(undo, u)
		}
		touched[tree.Parent(st.Path)] = true
		if st.Kind == tree.StepMkdir {
			touched[st.Path] = true
		}
	}
	// Barrier: every touched directory is synced before success is told:
	// one syncfs of the workspace's filesystem where there is one.
	if rd, err := a.root.OpenDir("."); err == nil {
		err = rd.SyncFS()
		rd.Close()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return AsError(fmt.Errorf("sync the workspace: %w", err))
		}
	}
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		if !a.rmdirs[d] {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	for _, rel := range dirs {
		d, err := a.root.OpenDir(rel)
		if err != nil {
			return AsError(fmt.Errorf("sync %s: %w", rel, err))
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return AsError(fmt.Errorf("sync %s: %w", rel, err))
		}
	}
	return nil
}

// cleanup removes the pre-images moved aside during execute; it runs once
// the op is committed (their content is in the blob store). It reports
// whether every one is gone and synced; if not, the committed journal is
// kept so that recovery finishes the cleanup.
func (a *applier) cleanup() bool {
	clean := true
	dirs := map[string]bool{}
	for _, t := range a.trash {
		if !t.live {
			continue
		}
		d, err := a.root.OpenDir(t.dir)
		if err != nil {
			clean = false
			continue
		}
		remove := d.Unlink
		if st, serr := d.Lstat(t.name); serr == nil && st.Mode.IsDir() {
			remove = d.Rmdir
		}
		if err := remove(t.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			clean = false
		}
		d.Close()
		dirs[t.dir] = true
		failpoint.Hit("apply:cleanup")
	}
	if len(dirs) == 0 {
		return clean
	}
	// The removals are durable before the journal goes: one syncfs of the
	// workspace's filesystem, or an fsync of each directory.
	if rd, err := a.root.OpenDir("."); err == nil {
		err = rd.SyncFS()
		rd.Close()
		if err == nil {
			return clean
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return false
		}
	}
	for dir := range dirs {
		d, err := a.root.OpenDir(dir)
		if err != nil || d.Sync() != nil {
			clean = false
		}
		if err == nil {
			d.Close()
		}
	}
	return clean
}

// sameObject reports whether st is the object the check phase saw at rel.
func (a *applier) sameObject(rel string, st fsx.Stat) bool {
	if failpoint.Disabled("cas") {
		return true
	}
	want, ok := a.ident[rel]
	if !ok {
		return false
	}
	if want.Ino != st.Ino || want.Mode.Type() != st.Mode.Type() {
		return false
	}
	if st.Mode.IsRegular() {
		return want.Size == st.Size && want.Mtime == st.Mtime
	}
	return true
}

// step performs one plan step and returns how to undo it.
func (a *applier) step(r journal.Record) (func() error, error) {
	st := r.Step
	d, err := a.root.OpenDir(tree.Parent(st.Path))
	if err != nil {
		if errors.Is(err, fsx.ErrSymlink) {
			return nil, &Conflict{Path: st.Path, Kind: "symlink", Detail: "a directory above it became a symlink"}
		}
		return nil, err
	}
	defer d.Close()
	name := tree.Base(st.Path)
	switch st.Kind {
	case tree.StepRemove, tree.StepRmdir:
		cur, err := d.Lstat(name)
		if err != nil {
			return nil, &Conflict{Path: st.Path, Kind: "deleted"}
		}
		if !a.sameObject(st.Path, cur) {
			return nil, &Conflict{Path: st.Path, Kind: "modified"}
		}
		if st.Kind == tree.StepRmdir {
			if err := d.Rmdir(name); err != nil {
				if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
					return nil, &Conflict{Path: st.Path, Kind: "added-inside-deleted-dir"}
				}
				return nil, err
			}
			perm := fs.FileMode(st.Old.Perm)
			return a.undoIn(st.Path, func(d *fsx.Dir) error { return d.Mkdir(name, perm) }), nil
		}
		tmp := r.Tmp
		if err := d.RenameNoReplace(name, d, tmp); err != nil {
			return nil, err
		}
		failpoint.Hit("apply:moved-aside")
		moved, err := d.Lstat(tmp)
		if err != nil || !a.sameObject(st.Path, moved) {
			if rerr := d.RenameNoReplace(tmp, d, name); rerr != nil {
				return nil, putBackError(st.Path, fmt.Errorf("changed while the apply ran"), rerr)
			}
			return nil, &Conflict{Path: st.Path, Kind: "modified"}
		}
		if r.Unlink {
			// Its directory goes too: the pre-image lives on in the blob
			// store (files) or in the plan (symlinks).
			if err := d.Unlink(tmp); err != nil {
				if rerr := d.RenameNoReplace(tmp, d, name); rerr != nil {
					return nil, putBackError(st.Path, err, rerr)
				}
				return nil, err
			}
			return a.undoIn(st.Path, func(d *fsx.Dir) error { return a.restore(d, name, st.Old) }), nil
		}
		item := len(a.trash)
		a.trash = append(a.trash, trashItem{dir: tree.Parent(st.Path), name: tmp, live: true})
		return a.undoIn(st.Path, func(d *fsx.Dir) error {
			a.trash[item].live = false
			return d.RenameNoReplace(tmp, d, name)
		}), nil
	case tree.StepMkdir:
		if err := d.Mkdir(name, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, &Conflict{Path: st.Path, Kind: "created"}
			}
			return nil, err
		}
		return a.undoIn(st.Path, func(d *fsx.Dir) error { return d.Rmdir(name) }), nil
	case tree.StepWrite, tree.StepSymlink:
		tmp, ok := a.pretemps[r.Tmp]
		if ok {
			delete(a.pretemps, r.Tmp)
		} else if tmp, err = a.makeTemp(d, st, r.Tmp, true); err != nil {
			return nil, err
		}
		failpoint.Hit("apply:temp-written")
		if st.Old == nil {
			if err := d.RenameNoReplace(tmp, d, name); err != nil {
				d.Unlink(tmp)
				if errors.Is(err, fs.ErrExist) {
					return nil, &Conflict{Path: st.Path, Kind: "created"}
				}
				return nil, err
			}
			return a.undoIn(st.Path, func(d *fsx.Dir) error { return d.Unlink(name) }), nil
		}
		if err := d.Exchange(tmp, d, name); err != nil {
			d.Unlink(tmp)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &Conflict{Path: st.Path, Kind: "deleted"}
			}
			return nil, err
		}
		failpoint.Hit("apply:exchanged")
		displaced, err := d.Lstat(tmp)
		if err != nil || !a.sameObject(st.Path, displaced) {
			// Someone replaced the file between check and swap: put their
			// version back and give up.
			if rerr := d.Exchange(tmp, d, name); rerr != nil {
				return nil, putBackError(st.Path, fmt.Errorf("changed while the apply ran"), rerr)
			}
			d.Unlink(tmp)
			return nil, &Conflict{Path: st.Path, Kind: "modified", Detail: "changed while the apply ran"}
		}
		item := len(a.trash)
		a.trash = append(a.trash, trashItem{dir: tree.Parent(st.Path), name: tmp, live: true})
		return a.undoIn(st.Path, func(d *fsx.Dir) error {
			a.trash[item].live = false
			if err := d.Exchange(tmp, d, name); err != nil {
				return err
			}
			return d.Unlink(tmp)
		}), nil
	case tree.StepChmod:
		cur, err := d.Lstat(name)
		if err != nil || !a.sameObject(st.Path, cur) {
			return nil, &Conflict{Path: st.Path, Kind: "modified"}
		}
		if err := d.Chmod(name, fs.FileMode(st.New.Perm)); err != nil {
			return nil, err
		}
		old := fs.FileMode(st.Old.Perm)
		return a.undoIn(st.Path, func(d *fsx.Dir) error { return d.Chmod(name, old) }), nil
	case tree.StepDirPerm:
		cur, err := d.Lstat(name)
		if err != nil || !cur.Mode.IsDir() {
			return nil, &Conflict{Path: st.Path, Kind: "type-changed"}
		}
		if err := d.Chmod(name, fs.FileMode(st.New.Perm)); err != nil {
			return nil, err
		}
		old := cur.Mode.Perm()
		return a.undoIn(st.Path, func(d *fsx.Dir) error { return d.Chmod(name, old) }), nil
	}
	return nil, fmt.Errorf("unknown step %v", st.Kind)
}

// putBackError reports a step that failed and could not put back what it
// had moved: it is an internal error, so the journal stays and recovery
// finishes the rollback.
func putBackError(rel string, err, rerr error) error {
	return &Error{Code: CodeInternal, Message: fmt.Sprintf("apply %s: %v, and it could not be put back: %v", rel, err, rerr)}
}

// undoIn returns an undo action that runs fn on rel's parent directory,
// opened afresh when the undo runs (an earlier undo may have recreated it).
func (a *applier) undoIn(rel string, fn func(d *fsx.Dir) error) func() error {
	return func() error {
		d, err := a.root.OpenDir(tree.Parent(rel))
		if err != nil {
			return fmt.Errorf("undo %s: %w", rel, err)
		}
		defer d.Close()
		if err := fn(d); err != nil {
			return fmt.Errorf("undo %s: %w", rel, err)
		}
		return nil
	}
}

// restore recreates a removed file or symlink from its pre-image.
func (a *applier) restore(d *fsx.Dir, name string, old *tree.Entry) error {
	tmp, err := a.makeTemp(d, tree.Step{Kind: map[tree.Type]tree.StepKind{tree.File: tree.StepWrite, tree.Symlink: tree.StepSymlink}[old.Type], New: old}, tempPrefix+"restore-", true)
	if err != nil {
		return err
	}
	if err := d.RenameNoReplace(tmp, d, name); err != nil {
		d.Unlink(tmp)
		return err
	}
	return nil
}

// makeTemp writes the new content of st (a file's blob or a symlink) under
// a fresh temporary name in d, durably, and returns the name.
func (a *applier) makeTemp(d *fsx.Dir, st tree.Step, prefix string, durable bool) (string, error) {
	if st.Kind == tree.StepSymlink {
		tmp := prefix + "l"
		if err := d.Symlink(st.New.Target, tmp); err != nil {
			return "", err
		}
		return tmp, nil
	}
	f, tmp, err := d.CreateTemp(prefix)
	if err != nil {
		return "", err
	}
	// The content is checked against its digest as it is copied: a
	// damaged blob never lands (the temporary file goes below).
	_, err = a.ws.blobs.CopyTo(context.Background(), f, blob.Digest(st.New.Digest))
	if err == nil {
		err = f.Chmod(fs.FileMode(st.New.Perm))
	}
	if err == nil && durable {
		err = fsx.SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.Unlink(tmp)
		return "", err
	}
	return tmp, nil
}

// advanceBase moves the stage's base forward over the applied changes, so
// that they leave the change set, and settles the stage when nothing is
// left.
func (s *Stage) advanceBase(ctx context.Context, cs *ChangeSet, applied []tree.Change) error {
	m := cs.base
	byPath := make(map[string]*tree.Change, len(applied))
	for i := range applied {
		byPath[applied[i].Path] = &applied[i]
	}
	root, err := fsx.OpenRoot(s.ws.path)
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	next := make([]tree.Entry, 0, len(m.Entries)+len(applied))
	for _, e := range m.Entries {
		if _, ok := byPath[e.Path]; !ok {
			next = append(next, e)
		}
	}
	for _, c := range byPath {
		if c.New == nil {
			continue
		}
		e := *c.New
		if st, err := root.Lstat(c.Path); err == nil {
			e.WS = tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}
		}
		next = append(next, e)
	}
	tree.SortEntries(next)
	nm := &tree.Manifest{Fence: m.Fence, ViewFence: m.ViewFence, Entries: next}
	if err := writeManifest(s.ws.stageDir(s.ID()), nm); err != nil {
		return AsError(err)
	}
	cs.base = nm
	if len(tree.Compare(nm.Entries, cs.view)) == 0 {
		s.row.State = StateApplied
	}
	s.row.UpdatedAt = s.ws.now().UTC()
	if err := s.ws.db.UpdateStage(ctx, s.row); err != nil {
		return AsError(err)
	}
	return nil
}

// opBody is what the ops table keeps about an op: enough to show it and to
// undo it.
type opBody struct {
	Stage           string     `json:"stage"`
	Paths           []string   `json:"paths"`
	Written         []string   `json:"written"`
	ChangesetDigest string     `json:"changeset_digest"`
	Changes         []opChange `json:"changes"`
	// Undoes names the op an undo reversed.
	Undoes string `json:"undoes,omitempty"`
	// Exclude holds the exclude selectors of the apply or undo.
	Exclude []string `json:"exclude,omitempty"`
}

// opChange is one path an op wrote: its pre-image and post-image.
type opChange struct {
	Path string     `json:"path"`
	Old  *entryJSON `json:"old"`
	New  *entryJSON `json:"new"`
}

type entryJSON struct {
	Type   string `json:"type"`
	Perm   uint32 `json:"perm"`
	Size   int64  `json:"size"`
	Digest string `json:"digest,omitempty"`
	Target string `json:"target,omitempty"`
}

func toEntryJSON(e *tree.Entry) *entryJSON {
	if e == nil {
		return nil
	}
	return &entryJSON{Type: e.Type.String(), Perm: e.Perm, Size: e.Size, Digest: e.Digest, Target: e.Target}
}

func fromEntryJSON(p string, j *entryJSON) *tree.Entry {
	if j == nil {
		return nil
	}
	t := map[string]tree.Type{"file": tree.File, "dir": tree.Dir, "symlink": tree.Symlink}[j.Type]
	return &tree.Entry{Path: p, Type: t, Perm: j.Perm, Size: j.Size, Digest: j.Digest, Target: j.Target}
}

func opChanges(cs []tree.Change) []opChange {
	out := make([]opChange, len(cs))
	for i, c := range cs {
		out[i] = opChange{Path: c.Path, Old: toEntryJSON(c.Old), New: toEntryJSON(c.New)}
	}
	return out
}

// opRecord prepares the op row and receipt of an apply before it runs, so
// that they can travel in the journal.
func (s *Stage) opRecord(opID string, cs *ChangeSet, opts ApplyOptions, res *ApplyResult, todo, already []tree.Change) (*opRecord, error) {
	body, err := json.Marshal(opBody{Stage: s.ID(), Paths: nonNil(opts.Paths), Exclude: opts.Exclude, Written: nonNil(res.Written),
		ChangesetDigest: cs.Digest, Changes: opChanges(todo)})
	if err != nil {
		return nil, AsError(err)
	}
	now := s.ws.now().UTC()
	r := s.newReceipt("apply", cs)
	r.OpID = opID
	r.Approved = opts.Approve
	r.Paths = append(r.Paths, opts.Paths...)
	r.ResultDigest = tree.Digest(tree.Result(cs.base.Entries, append(append([]tree.Change(nil), todo...), already...)))
	rec := &opRecord{
		Op:      state.Op{ID: opID, WorkspaceID: s.ws.id, StageID: s.ID(), Kind: "apply", State: "committed", Body: body, CreatedAt: now},
		Receipt: r,
	}
	if fs := opts.flowStep; fs != nil && !failpoint.Disabled("flow-atomic") {
		fs.Result.OpID, fs.Result.StageID = opID, s.ID()
		fs.Result.Written = append([]string(nil), res.Written...)
		fs.Result.ChangesetDigest, fs.Result.Counts, fs.Result.ResultDigest = cs.Digest, cs.Counts, r.ResultDigest
		fs.Result.Receipts = append(fs.Result.Receipts, r.ID)
		if len(fs.Result.NotTransactional) == 0 {
			fs.Result.NotTransactional = r.NotTransactional
		}
		step := *fs
		rec.Step = &step
	}
	return rec, nil
}

func sameInode(fi os.FileInfo, st fsx.Stat) bool {
	ino, dev, ok := inodeOf(fi)
	return ok && ino == st.Ino && dev == st.Dev
}

// prepareTemps writes the new content of every file and symlink the plan
// writes under its temporary name before any step runs, in every directory
// that exists already, and makes them durable together: one syncfs of the
// workspace's filesystem instead of one fsync each (each is fsync'd where
// syncfs is missing). Steps whose directory the plan creates make their own
// temporary file, fsync'd, when they run.
func (a *applier) prepareTemps(recs []journal.Record) error {
	a.pretemps = map[string]string{}
	made := map[string]bool{}
	for _, r := range recs {
		if r.Step.Kind == tree.StepMkdir {
			made[r.Step.Path] = true
		}
	}
	inNewDir := func(p string) bool {
		for d := tree.Parent(p); d != "."; d = tree.Parent(d) {
			if made[d] {
				return true
			}
		}
		return false
	}
	var files []string
	for _, r := range recs {
		if (r.Step.Kind != tree.StepWrite && r.Step.Kind != tree.StepSymlink) || inNewDir(r.Step.Path) {
			continue
		}
		d, err := a.root.OpenDir(tree.Parent(r.Step.Path))
		if err != nil {
			return err
		}
		tmp, err := a.makeTemp(d, r.Step, r.Tmp, false)
		d.Close()
		if err != nil {
			return err
		}
		a.pretemps[r.Tmp] = tmp
		files = append(files, r.Step.Path)
		failpoint.Hit("apply:temp-prepared")
	}
	if len(files) == 0 {
		return nil
	}
	rd, err := a.root.OpenDir(".")
	if err != nil {
		return err
	}
	err = rd.SyncFS()
	rd.Close()
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	for _, r := range recs {
		tmp, ok := a.pretemps[r.Tmp]
		if !ok || r.Step.Kind != tree.StepWrite {
			continue
		}
		if err := a.syncTemp(r.Step.Path, tmp); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) syncTemp(rel, tmp string) error {
	d, err := a.root.OpenDir(tree.Parent(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := d.OpenFile(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	return fsx.SyncFile(f)
}

// dropPretemps removes the prepared temporary files no step consumed. It
// reports whether every one is gone.
func (a *applier) dropPretemps(recs []journal.Record) bool {
	clean := true
	for _, r := range recs {
		tmp, ok := a.pretemps[r.Tmp]
		if !ok {
			continue
		}
		d, err := a.root.OpenDir(tree.Parent(r.Step.Path))
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
		d.Close()
	}
	a.pretemps = nil
	return clean
}
