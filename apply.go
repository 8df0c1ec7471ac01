package wtx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
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

// testHookStored, when set by a test, runs once the apply's blobs are
// stored, before the journal is written. testHookStoredDamages says the
// hook damages them: the temporary files are then written from the store,
// not from the payloads the apply holds in memory (which it read and
// hashed itself, and which a damaged object does not reach).
var (
	testHookStored        func()
	testHookStoredDamages bool
)

// Apply folds the selected part of the change set onto the workspace, all
// or nothing. A settled or dropped stage answers at once (refusal.dropped),
// and a selection that changed since it was reviewed is refused
// (refusal.changed-since-review), as is a stage holding special files
// (precondition.special-file) or names reserved for wtx. Then every check
// runs, and one refusal reports every conflict found, of every class, with
// nothing written: boundary (a name that leaves the workspace, a staged
// file sharing an inode with the workspace, a symlink or mount point in the
// way), protected (selectors and .git, unless approved), drift (a selected
// path that no longer holds the stage's base) and stale reads (unless
// ignored). The refusal's code is that of its first class in that order
// (refusal.boundary, refusal.protected, refusal.target-changed,
// refusal.stale-read); it carries one repair per class. Paths that already
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
	if err := s.authorizeApply(opts); err != nil {
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
	if err := s.settleFileOpsLocked(ctx); err != nil {
		return nil, err
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
// It reads top to bottom as the protocol runs: select, refuse what can never
// be applied, run every check, refuse with all conflicts or write.
func (s *Stage) apply(ctx context.Context, opts ApplyOptions) (res *ApplyResult, err error) {
	// An apply, refused or not, leaves a signed receipt: a key that cannot
	// sign it stops the apply before anything is checked or written.
	if !opts.DryRun {
		if err := s.ws.checkReceiptKey(); err != nil {
			return nil, err
		}
	}
	cs, err := s.SelectChanges(ctx, Selection{Paths: opts.Paths, Exclude: opts.Exclude})
	if err != nil {
		return nil, err
	}
	res = &ApplyResult{Changes: cs.Changes, ChangesetDigest: cs.Digest, Counts: cs.Counts, DryRun: opts.DryRun}
	defer func() {
		if err != nil && !opts.DryRun && errors.Is(err, ErrRefused) {
			s.ws.recordRefusal(ctx, s, cs, opts, AsError(err))
		}
	}()
	// 1. The selection.
	if opts.Expect != "" && opts.Expect != cs.Digest {
		return nil, &Error{Code: CodeChangedSinceReview,
			Message: fmt.Sprintf("the selected change set of %s changed since it was reviewed (expected %s, now %s)", s.ID(), opts.Expect, cs.Digest),
			Repairs: []Repair{{Action: RepairReview, Detail: "look at the change set again", Stage: s.ID()}}}
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
	// 2. What no apply ever writes.
	if len(cs.Special) > 0 {
		return nil, specialError(s, cs.Special)
	}
	for i := range cs.changes {
		if reservedPath(cs.changes[i].Path) {
			return nil, reservedApplyError(s.ID(), cs)
		}
	}
	if err := s.checkRecorded(ctx, cs.changes); err != nil {
		return nil, err
	}
	if err := s.checkResolved(ctx, cs.changes); err != nil {
		return nil, err
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
	// 3. Every check, every conflict.
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	// Payloads and pre-images go into the blob store as one batch, made
	// durable (and visible) before the journal is written.
	batch := s.ws.blobs.NewBatch()
	committed := false
	defer func() {
		if !committed {
			batch.Abort()
		}
	}()
	chk, err := s.checkApply(ctx, root, batch, cs, opts, partial)
	if err != nil {
		return nil, err
	}
	if e := s.refusal(chk.conflicts, cs.changes); e != nil {
		return nil, e
	}
	for _, c := range chk.already {
		res.AlreadyApplied = append(res.AlreadyApplied, c.Path)
	}
	for _, c := range chk.todo {
		res.Written = append(res.Written, c.Path)
	}
	if opts.DryRun || len(chk.todo) == 0 {
		if len(chk.todo) == 0 && !opts.DryRun {
			if err := s.advanceBase(ctx, cs, chk.already); err != nil {
				return nil, err
			}
			res.Settled = s.row.State == StateApplied
		}
		return res, nil
	}
	// 4. Write: the blobs (payloads, and the pre-images the store lacks),
	// then the journaled plan.
	if err := keepPreimages(ctx, root, s.ws.blobs, batch, chk.todo, chk.cas.ident); err != nil {
		return nil, err
	}
	if err := batch.Commit(); err != nil {
		return nil, AsError(err)
	}
	committed = true
	if testHookStored != nil {
		testHookStored()
	}
	opID := newID("op", s.ws.now())
	rec, err := s.opRecord(opID, cs, opts, res, chk.todo, chk.already)
	if err != nil {
		return nil, err
	}
	held := batch.Held
	if testHookStoredDamages {
		held = nil
	}
	// Settling runs past the commit marker: an interrupt does not stop it.
	settle := func() error {
		return s.advanceBase(context.WithoutCancel(ctx), cs, slices.Concat(chk.todo, chk.already))
	}
	if err := s.ws.commitOp(ctx, root, chk.cas.checked(chk.todo), held, s.ws.writeProgress(opts.Progress), rec, settle); err != nil {
		return nil, err
	}
	res.OpID = opID
	res.Settled = s.row.State == StateApplied
	res.Receipt = &rec.Receipt
	return res, nil
}

// applyCheck is what the checks of an apply found.
type applyCheck struct {
	cas *casReader
	// todo are the changes to write, already those in place.
	todo, already []tree.Change
	// conflicts are every conflict of every class.
	conflicts []Conflict
}

// checkApply runs every check of an apply and collects every conflict:
// names that leave the workspace, protected paths, staged files sharing an
// inode with the workspace, drift and stale reads. On the way it stores in
// batch the staged payloads the blob store lacks.
func (s *Stage) checkApply(ctx context.Context, root *fsx.Root, batch *blob.Batch, cs *ChangeSet, opts ApplyOptions, partial map[string]bool) (*applyCheck, error) {
	chk := &applyCheck{cas: newCASReader(root, nil)}
	chk.cas.progress = func(i, n int) { s.ws.progress(PhaseCheck, i, n) }
	reachable := make([]tree.Change, 0, len(cs.changes))
	for _, c := range cs.changes {
		if err := fsx.ValidRel(c.Path); err != nil {
			chk.conflicts = append(chk.conflicts, Conflict{Path: c.Path, Kind: "boundary", Detail: err.Error()})
			continue
		}
		reachable = append(reachable, c)
	}
	todo, already, drift, err := chk.cas.check(ctx, reachable)
	if err != nil {
		return nil, err
	}
	// What the apply writes: the selection less what already holds its
	// staged state. Its protected paths need the applier's approval.
	if err := s.liveProtection(false); err != nil {
		return nil, err
	}
	if prot := s.protection().writes(without(cs.changes, already)); len(prot) > 0 && !mayWriteProtected(s.applier(opts), opts.Approve) {
		chk.conflicts = append(chk.conflicts, s.protectedError(protectedPaths(prot)).Conflicts...)
	}
	shared, err := s.payloads(ctx, batch, reachable, partial, chk.cas.ident)
	if err != nil {
		return nil, err
	}
	chk.todo, chk.already = todo, already
	chk.conflicts = append(chk.conflicts, shared...)
	chk.conflicts = append(chk.conflicts, drift...)
	if !opts.IgnoreStaleReads {
		stale, err := s.staleReads(ctx, root, cs.all)
		if err != nil {
			return nil, err
		}
		chk.conflicts = append(chk.conflicts, stale...)
	}
	return chk, nil
}

// applier is who applies: a flow's agent step, else the workspace's actor.
func (s *Stage) applier(opts ApplyOptions) Actor {
	if opts.actor != nil {
		return *opts.actor
	}
	return s.ws.actor
}

// authorizeApply asks the gate whether the applier may apply at all, and
// ignore stale reads if it asks to; protected paths are asked about once
// the apply knows what it writes.
func (s *Stage) authorizeApply(opts ApplyOptions) error {
	who := s.applier(opts)
	if err := Authorize(who, ActionApply, false); err != nil {
		return err
	}
	if opts.IgnoreStaleReads {
		return Authorize(who, ActionIgnoreStaleReads, false)
	}
	return nil
}

func protectedPaths(pps []ProtectedPath) []string {
	out := make([]string, len(pps))
	for i, p := range pps {
		out[i] = p.Path
	}
	return out
}

// payloads copies every staged file to be written into batch, so that what
// lands is exactly what was scanned, unless the blob store holds its
// content intact already; and it returns a conflict for each staged file that
// shares an inode with its workspace file (ident: what the casReader saw in
// the workspace). The files are opened in order and copied by a few
// goroutines at once: each copy creates a file, and the kernel does that
// work on as many processors as ask.
func (s *Stage) payloads(ctx context.Context, batch *blob.Batch, cs []tree.Change, partial map[string]bool, ident map[string]fsx.Stat) ([]Conflict, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	raw, _ := v.(stage.RawOpener)
	shared := make([]*Conflict, len(cs))
	w := engine.StartWorkers(ctx, len(cs))
	for i := range cs {
		c := &cs[i]
		s.ws.progress(PhaseRead, i, len(cs))
		if c.New == nil || c.New.Type != tree.File || partial[c.Path] {
			continue
		}
		cur, inWS := ident[c.Path]
		stored := engine.Intact(s.ws.blobs, blob.Digest(c.New.Digest))
		if stored && !inWS {
			continue // it lands from the store, and no workspace file can share its inode
		}
		if raw != nil {
			f, ok, err := raw.OpenRaw(c.Path)
			if err != nil {
				w.Fail(stagingError(fmt.Errorf("read staged %s: %w", c.Path, err)))
				break
			}
			if ok {
				run := func() (err error) {
					shared[i], err = storePayload(ctx, batch, c, f, cur, inWS, stored)
					return err
				}
				if !w.Do(run, func() { _ = f.Close() }) { // read-only
					break
				}
				continue
			}
		}
		f, err := v.OpenFile(c.Path)
		if err != nil {
			w.Fail(stagingError(fmt.Errorf("read staged %s: %w", c.Path, err)))
			break
		}
		run := func() error {
			cf, err := storeOpened(ctx, batch, c, f, cur, inWS, stored)
			shared[i] = cf
			return err
		}
		if !w.Do(run, func() { _ = f.Close() }) { // read-only
			break
		}
	}
	if err := w.Wait(); err != nil {
		return nil, err
	}
	var out []Conflict
	for _, cf := range shared {
		if cf != nil {
			out = append(out, *cf)
		}
	}
	return out, nil
}

// sharedInode is the conflict of a staged file that is the workspace file
// at path itself.
func sharedInode(path string) *Conflict {
	return &Conflict{Path: path, Kind: "shared-inode",
		Detail: "the staged file is the workspace file itself (same inode); applying it would be meaningless and writing it was never staged"}
}

// storeOpened is storePayload for a staged file the view opened as f (and
// closed here).
func storeOpened(ctx context.Context, batch *blob.Batch, c *tree.Change, f *os.File, cur fsx.Stat, inWS, stored bool) (*Conflict, error) {
	fi, err := f.Stat()
	if err == nil && inWS && sameInode(fi, cur) {
		_ = f.Close() // read-only
		return sharedInode(c.Path), nil
	}
	if err == nil && stored {
		_ = f.Close() // read-only
		return nil, nil
	}
	d, _, perr := batch.Put(ctx, f)
	_ = f.Close() // read-only: what was read is checked below
	if err = errors.Join(err, perr); err != nil {
		return nil, AsError(fmt.Errorf("store staged %s: %w", c.Path, err))
	}
	if string(d) != c.New.Digest {
		return nil, &Error{Code: CodeUnstable, Message: fmt.Sprintf("staged file %s changed while it was applied; run the apply again", quote.Path(c.Path))}
	}
	return nil, nil
}

// storePayload is one file of payloads, opened as f (and closed here): a
// conflict when it is the workspace file itself (cur, when inWS), else its
// content copied into batch unless the store holds it (stored).
func storePayload(ctx context.Context, batch *blob.Batch, c *tree.Change, f *fsx.File, cur fsx.Stat, inWS, stored bool) (*Conflict, error) {
	defer f.Close()
	if st := f.Stat(); inWS && st.Ino == cur.Ino && st.Dev == cur.Dev {
		return sharedInode(c.Path), nil
	}
	if stored {
		return nil, nil
	}
	d, _, err := batch.PutFile(ctx, f)
	if err != nil {
		return nil, AsError(fmt.Errorf("store staged %s: %w", c.Path, err))
	}
	if string(d) != c.New.Digest {
		return nil, &Error{Code: CodeUnstable, Message: fmt.Sprintf("staged file %s changed while it was applied; run the apply again", quote.Path(c.Path))}
	}
	return nil, nil
}

// refusalClasses are the conflict classes in the order an apply reports
// them; the first present gives the refusal its code.
var refusalClasses = []struct {
	class ConflictClass
	code  string
}{
	{ClassBoundary, CodeBoundary},
	{ClassProtected, CodeProtected},
	{ClassDrift, CodeTargetChanged},
	{ClassStaleRead, CodeStaleRead},
}

// refusal is the one refusal that reports every conflict an apply found,
// grouped by class in the order of refusalClasses, with the repairs of each
// class; nil when there is none.
//
// An "apply the rest" repair (RepairExclude) is offered only when leaving
// its paths out leaves something to apply of selected, the selection.
func (s *Stage) refusal(conflicts []Conflict, selected []tree.Change) *Error {
	if len(conflicts) == 0 {
		return nil
	}
	byClass := map[ConflictClass][]Conflict{}
	for _, c := range conflicts {
		byClass[c.Class()] = append(byClass[c.Class()], c)
	}
	e := &Error{}
	var msgs []string
	seen := map[string]bool{}
	for _, rc := range refusalClasses {
		cfs := byClass[rc.class]
		if len(cfs) == 0 {
			continue
		}
		if e.Code == "" {
			e.Code = rc.code
		}
		e.Conflicts = append(e.Conflicts, cfs...)
		msgs = append(msgs, s.classMessage(rc.class, cfs))
		for _, r := range s.classRepairs(rc.class, cfs) {
			if r.Action == RepairExclude && len(excludeChanges(selected, literalSelectors(r.Paths))) == 0 {
				continue // nothing would be left to apply
			}
			if key := string(r.Action) + "\x00" + r.Command; !seen[key] {
				seen[key] = true
				e.Repairs = append(e.Repairs, r)
			}
		}
	}
	e.Message = strings.Join(msgs, "; also ")
	return e
}

// classMessage says what the conflicts of one class are.
func (s *Stage) classMessage(class ConflictClass, cfs []Conflict) string {
	first := fmt.Sprintf("%s (%s)", quote.Path(cfs[0].Path), cfs[0].Kind)
	switch class {
	case ClassBoundary:
		return fmt.Sprintf("apply of %s would leave the workspace or write through a link: %d path(s); first: %s", s.ID(), len(cfs), first)
	case ClassProtected:
		return s.protectedError(conflictPaths(cfs)).Message
	case ClassStaleRead:
		return fmt.Sprintf("%d file(s) that %s read changed in the workspace since; first: %s", len(cfs), s.ID(), quote.Path(cfs[0].Path))
	}
	return fmt.Sprintf("%d path(s) changed outside %s since it opened; first: %s", len(cfs), s.ID(), first)
}

// classRepairs are the ways out of one class of conflicts.
func (s *Stage) classRepairs(class ConflictClass, cfs []Conflict) []Repair {
	switch class {
	case ClassProtected:
		return s.protectedError(conflictPaths(cfs)).Repairs
	case ClassBoundary:
		rs := driftRepairs(s, cfs)[2:] // leave them out, or start again
		rs[0].Detail = "apply the rest; the paths that cannot be written safely stay staged"
		return rs
	case ClassStaleRead:
		tx := s.ID()
		return []Repair{
			{Action: RepairReread, Class: class, Stage: tx, Paths: conflictPaths(cfs), Detail: "read the file again and check the stage's changes still hold", Command: fmt.Sprintf("wtx read --tx %s -- %s", tx, shellQuote(cfs[0].Path))},
			{Action: RepairRebase, Class: class, Stage: tx, Detail: "re-run the stage's edits on the current workspace", Command: "wtx rebase " + tx},
			{Action: RepairIgnoreStale, Class: class, Stage: tx, Detail: "apply anyway", Command: "wtx apply " + tx + " --ignore-stale-reads"},
		}
	}
	return driftRepairs(s, cfs)
}

func conflictPaths(cfs []Conflict) []string {
	out := make([]string, len(cfs))
	for i, c := range cfs {
		out[i] = c.Path
	}
	return out
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

// advanceBase moves the stage's base forward over the applied changes, so
// that they leave the change set, and settles the stage when nothing is
// left.
func (s *Stage) advanceBase(ctx context.Context, cs *ChangeSet, applied []tree.Change) error {
	m := cs.base
	root, err := s.ws.openRoot()
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	dirs := fsx.NewDirCache(root)
	defer dirs.Close()
	next := make([]tree.Entry, 0, len(m.Entries)+len(applied))
	tree.Fold(m.Entries, applied, func(e *tree.Entry, c *tree.Change) {
		if c == nil {
			next = append(next, *e)
			return
		}
		ne := *e
		if st, err := lstatCached(dirs, c.Path); err == nil {
			ne.WS = tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}
		}
		next = append(next, ne)
	})
	nm := &tree.Manifest{Fence: m.Fence, ViewFence: m.ViewFence, Entries: next}
	if err := s.ws.writeManifest(s.ID(), nm); err != nil {
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

func sameInode(fi os.FileInfo, st fsx.Stat) bool {
	ino, dev, ok := inodeOf(fi)
	return ok && ino == st.Ino && dev == st.Dev
}

// literalSelectors are selectors that match exactly paths (none for a path
// that makes no selector).
func literalSelectors(paths []string) tree.Selectors {
	var out tree.Selectors
	for _, p := range paths {
		if sel, err := tree.ParseSelector(LiteralSelector(p)); err == nil {
			out = append(out, sel)
		}
	}
	return out
}

// lstatCached describes rel, its directory taken from dirs.
func lstatCached(dirs *fsx.DirCache, rel string) (fsx.Stat, error) {
	d, err := dirs.Open(tree.Parent(rel))
	if err != nil {
		return fsx.Stat{}, err
	}
	return d.Lstat(tree.Base(rel))
}
