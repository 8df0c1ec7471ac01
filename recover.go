package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// RecoverResult reports what recovery did.
type RecoverResult struct {
	// RolledBack and RolledForward list the ops finished each way.
	RolledBack    []string `json:"rolled_back"`
	RolledForward []string `json:"rolled_forward"`
	// Discarded lists ops whose journal was damaged or missing while the
	// workspace shows no trace of the apply (no temporary files of wtx, no
	// commit marker, and every path of every open stage still holds what
	// its stage is based on): nothing of it reached the workspace. Their
	// journals are not deleted but set aside, into SetAside.
	Discarded []string `json:"discarded"`
	SetAside  []string `json:"set_aside"`
	// Kept lists paths left as someone changed them after the crash, when a
	// rollback was forced with keep-external.
	Kept []Conflict `json:"kept"`
	// Unsettled says, for an op rolled forward whose stage could not be
	// settled (read or updated), what went wrong; the stage stays open.
	Unsettled []string `json:"unsettled"`
}

// Recover finishes or rolls back applies that a crash interrupted. Every
// Open runs it; it is idempotent and runs under the workspace lock. Without
// a commit marker an op is rolled back, with one it is rolled forward. A path
// that someone changed after the crash is never overwritten: recovery stops
// with refusal.interrupted-apply naming it, unless keepExternal is set, in
// which case the external version is kept, reported, and recovery finishes
// (the op's pre-images stay in the blob store).
//
// A step that fails (a chmod, a read, a rename) is reported with every
// other failed step, and the journal stays for the next recovery. A
// damaged journal of an apply that left traces in the workspace (temporary
// files of wtx, or a commit marker) stays too: recovery refuses with
// refusal.interrupted-apply, and so does every command on the workspace,
// until a person puts the workspace right and sets the journal aside
// ([Workspace.SetAsideJournal]).
func (w *Workspace) Recover(ctx context.Context, keepExternal bool) (*RecoverResult, error) {
	unlock, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return w.recoverLocked(ctx, keepExternal)
}

// pendingRecovery reports whether an interrupted op waits for recovery. A
// journal directory that cannot be read is an error, not "nothing pending".
func (w *Workspace) pendingRecovery() (bool, error) {
	// What a finished op's journal left when its deletion was cut short
	// goes first: it is no journal any more.
	w.journals().Sweep()
	ops, err := w.journals().Pending()
	if err != nil {
		return false, stateIOError(w.stateDir, "read the journals", err)
	}
	return len(ops) > 0, nil
}

func (w *Workspace) recoverLocked(ctx context.Context, keepExternal bool) (*RecoverResult, error) {
	res := &RecoverResult{RolledBack: []string{}, RolledForward: []string{}, Discarded: []string{}, SetAside: []string{}, Kept: []Conflict{}, Unsettled: []string{}}
	ops, err := w.journals().Pending()
	if err != nil {
		return nil, stateIOError(w.stateDir, "read the journals", err)
	}
	for _, op := range ops {
		j, committed, err := w.journals().Load(op)
		if err != nil {
			if !errors.Is(err, journal.ErrCorrupt) && !errors.Is(err, fs.ErrNotExist) {
				return nil, stateIOError(w.stateDir, "read the journal of "+op, err)
			}
			if derr := w.damagedJournal(ctx, op, err); derr != nil {
				return nil, derr
			}
			// Verified: nothing of it reached the workspace.
			dst, err := w.setAsideJournal(op)
			if err != nil {
				return nil, err
			}
			res.Discarded = append(res.Discarded, op)
			res.SetAside = append(res.SetAside, dst)
			continue
		}
		if !w.sameWorkspace(j.Workspace) {
			return nil, &Error{Code: CodeInterruptedApply,
				Message: fmt.Sprintf("journal %s belongs to workspace %s, not %s: wtx does not act on it here; move it out of %s", op, j.Workspace, w.path, w.journalDir())}
		}
		if committed {
			unsettled, err := w.rollForward(ctx, j)
			if err != nil {
				return nil, err
			}
			if unsettled != "" {
				res.Unsettled = append(res.Unsettled, unsettled)
			}
			res.RolledForward = append(res.RolledForward, op)
			continue
		}
		kept, err := w.rollbackJournal(ctx, j, keepExternal)
		if err != nil {
			return nil, err
		}
		res.Kept = append(res.Kept, kept...)
		if err := w.journals().Remove(op); err != nil {
			return nil, stateIOError(w.stateDir, "remove the finished journal of "+op, err)
		}
		res.RolledBack = append(res.RolledBack, op)
	}
	return res, nil
}

// damagedJournal decides what a journal that does not decode (loadErr)
// means. Nothing of the op is known but its id, so wtx looks for every
// trace an apply leaves: temporary files of wtx in the workspace, the op's
// commit marker, and paths of open stages that no longer hold what their
// stage is based on (an apply writes only paths of its stage's change set,
// and its stage stays open until the journal goes; an apply whose steps all
// ran leaves no temporary file, only its paths in their staged state). With
// any trace, or when the stages cannot be compared, the journal stays and
// the answer is refusal.interrupted-apply with what was found and what to
// do. It returns nil only when the workspace shows that nothing of the op
// reached it.
//
// WTX_DISABLE=journal-evidence (failpoint build) skips the comparison with
// the stages: the negative control of the damaged-journal tests.
func (w *Workspace) damagedJournal(ctx context.Context, op string, loadErr error) error {
	temps := findTemps(w.path, 10)
	committed := w.journals().Committed(op)
	var evidence []string
	repairs := []Repair{}
	if len(temps) > 0 {
		q := make([]string, len(temps))
		for i, t := range temps {
			q[i] = quote.Path(t)
		}
		evidence = append(evidence, "the workspace holds temporary files of wtx ("+strings.Join(q, ", ")+")")
		repairs = append(repairs, Repair{Action: "inspect", Detail: "each " + tempPrefix + "* file holds the old or the new content of the file whose name follows it in its directory; put every such path back as it should be and remove the temporary files"})
	}
	if committed {
		evidence = append(evidence, "the op had committed (its commit marker is there)")
	}
	if len(evidence) == 0 && !failpoint.Disabled("journal-evidence") {
		traces, stages, err := w.stagedTraces(ctx)
		switch {
		case err != nil:
			evidence = append(evidence, fmt.Sprintf("wtx could not compare the workspace with its open stages (%v), so it cannot verify that nothing of the apply reached it", err))
		case len(traces) > 0:
			evidence = append(evidence, strings.Join(traces, "; "))
			for _, id := range stages {
				repairs = append(repairs, Repair{Action: "inspect", Detail: "check the paths named for stage " + id + " and put any that should not be so back; once the journal is set aside, 'wtx diff " + id + "' shows what is still to apply, and an apply of it writes that and leaves the paths already in place alone"})
			}
		}
	}
	if len(evidence) == 0 {
		return nil
	}
	repairs = append(repairs,
		Repair{Action: "set-aside", Detail: "then set the damaged journal aside (it is kept in lost+found in the state root)", Command: "wtx recover --set-aside " + op},
		Repair{Action: "check", Detail: "see everything else the state root holds", Command: "wtx fsck"})
	return &Error{Code: CodeInterruptedApply,
		Message: fmt.Sprintf("the journal of an apply (%s) is damaged (%v), and the workspace %s may hold some or all of what it wrote: %s. wtx cannot tell what the apply changed, keeps the journal (%s) and refuses to act on this workspace until it is put right",
			op, loadErr, quote.Path(w.path), strings.Join(evidence, "; "), filepath.Join(w.journalDir(), op)),
		Repairs: repairs}
}

// stagedTraces compares the workspace with every open stage's change set:
// it lists, per stage, the paths that no longer hold the stage's base (those
// holding their staged content, and those changed otherwise), and the ids
// of the stages concerned. It runs under the workspace lock.
func (w *Workspace) stagedTraces(ctx context.Context) (traces, stages []string, err error) {
	all, err := w.Stages(ctx)
	if err != nil {
		return nil, nil, err
	}
	root, err := w.openRoot()
	if err != nil {
		return nil, nil, AsError(err)
	}
	defer root.Close()
	const show = 5
	for _, s := range all {
		if s.State() != StateOpen {
			continue
		}
		cs, err := s.Changes(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("stage %s: %w", s.ID(), err)
		}
		_, already, conflicts, err := newCASReader(root, cs.base).check(ctx, cs.changes)
		if err != nil {
			return nil, nil, fmt.Errorf("stage %s: %w", s.ID(), err)
		}
		var staged, other []string
		for _, c := range already {
			staged = append(staged, quote.Path(c.Path))
		}
		for _, c := range conflicts {
			if c.Kind != "shared-inode" { // a fact about the file, not a change
				other = append(other, quote.Path(c.Path))
			}
		}
		if len(staged)+len(other) == 0 {
			continue
		}
		var parts []string
		if len(staged) > 0 {
			parts = append(parts, fmt.Sprintf("%d path(s) already hold their staged content (%s)", len(staged), listSome(staged, show)))
		}
		if len(other) > 0 {
			parts = append(parts, fmt.Sprintf("%d path(s) changed since the stage was based (%s)", len(other), listSome(other, show)))
		}
		traces = append(traces, fmt.Sprintf("of the %d change(s) of stage %s, %s", len(cs.changes), s.ID(), strings.Join(parts, ", and ")))
		stages = append(stages, s.ID())
	}
	return traces, stages, nil
}

// listSome joins the first n of names, saying how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// setAsideJournal moves op's journal into the state root's lost+found and
// returns where it went.
func (w *Workspace) setAsideJournal(op string) (string, error) {
	if err := ensurePrivateDirAt(w.stateDir, w.state, lostFoundName); err != nil {
		return "", err
	}
	dst := lostFoundName + "/" + fmt.Sprintf("journal-%s-%s-%s", w.id, op, w.now().UTC().Format("20060102T150405.000000000Z"))
	if err := w.journals().SetAside(op, dst); err != nil {
		return "", stateIOError(w.stateDir, "set the journal of "+op+" aside", err)
	}
	return filepath.Join(w.stateDir, dst), nil
}

// SetAsideJournal moves the damaged journal of op out of the way (into
// lost+found in the state root), once a person has put the workspace right
// after an interrupted apply whose journal could not be read. A journal
// that decodes is refused: recovery finishes it.
func (w *Workspace) SetAsideJournal(ctx context.Context, op string) (string, error) {
	unlock, err := w.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if strings.ContainsAny(op, "/\x00") || op == "" || op == "." || op == ".." {
		return "", errorf(CodeUsage, "%q is not an op id", op)
	}
	_, _, lerr := w.journals().Load(op)
	switch {
	case lerr == nil:
		return "", errorf(CodeUsage, "the journal of %s is sound: 'wtx recover' finishes it (or 'wtx recover --rollback')", op)
	case errors.Is(lerr, fs.ErrNotExist):
		if !w.journals().Exists(op) {
			return "", errorf(CodeOpNotFound, "no journal of %s in workspace %s", op, w.path)
		}
	case !errors.Is(lerr, journal.ErrCorrupt):
		return "", stateIOError(w.stateDir, "read the journal of "+op, lerr)
	}
	return w.setAsideJournal(op)
}

// rollForward finishes a committed op: what is left is cleanup and
// bookkeeping.
func (w *Workspace) rollForward(ctx context.Context, j *journal.Journal) (unsettled string, err error) {
	root, err := w.openRoot()
	if err != nil {
		return "", AsError(err)
	}
	defer root.Close()
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
	done := 0
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if err := removeTemps(root, dir, byDir[dir]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(dir), err))
		}
		done += len(byDir[dir])
		w.progress(PhaseRecover, done, len(left))
		failpoint.Hit("recover:forward-cleanup")
	}
	errs = append(errs, reclose(root, j.Records)...)
	if len(errs) > 0 {
		// The journal stays: the next recovery removes them.
		return "", stepsFailed(j.OpID, "finish", errs)
	}
	var rec opRecord
	if err := json.Unmarshal(j.Body, &rec); err != nil {
		return "", &Error{Code: CodeCorrupt, Message: fmt.Sprintf("journal of %s: damaged op record: %v; the op landed but cannot be recorded: the journal stays", j.OpID, err),
			Repairs: []Repair{{Action: "check", Detail: "see what the state root holds", Command: "wtx fsck"}}}
	}
	if err := w.recordOp(ctx, rec); err != nil {
		return "", err
	}
	failpoint.Hit("recover:forward-recorded")
	if err := w.settleApplied(ctx, rec); err != nil {
		// The op landed and is recorded; a stage that cannot be read must
		// not hold up every command on the workspace (its drop included):
		// it is reported, and an apply of it later settles it.
		unsettled = fmt.Sprintf("%s landed, but its stage %s could not be settled: %v", j.OpID, rec.Op.StageID, err)
	}
	if err := w.journals().Remove(j.OpID); err != nil {
		return "", stateIOError(w.stateDir, "remove the finished journal of "+j.OpID, err)
	}
	return unsettled, nil
}

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

// stepsFailed reports every step of op's recovery that failed: the journal
// stays, and the next recovery tries them again. The code is that of the
// first failure (io.* for a system error).
func stepsFailed(op, verb string, errs []error) *Error {
	first := AsError(errs[0])
	code := first.Code
	if code == CodeInternal {
		code = CodeIO
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &Error{Code: code, Err: errors.Join(errs...),
		Message: fmt.Sprintf("could not %s the interrupted apply %s: %d step(s) failed: %s; the journal stays and the workspace is not yet recovered", verb, op, len(errs), strings.Join(msgs, "; ")),
		Repairs: []Repair{{Action: "recover", Detail: "fix the cause (permissions, disk), then recover again", Command: "wtx recover"}}}
}

// rollback undoes an uncommitted op (used when the commit marker cannot be
// written).
func (w *Workspace) rollback(ctx context.Context, j *journal.Journal) error {
	_, err := w.rollbackJournal(ctx, j, false)
	return err
}

// rollbackJournal puts every path of j back to its pre-image, newest step
// first. Each record is judged by what the workspace holds now, so a crash at
// any point (of the apply or of an earlier recovery) is handled the same way.
// A step that fails is reported with all the others that fail; the journal
// then stays.
func (w *Workspace) rollbackJournal(ctx context.Context, j *journal.Journal, keepExternal bool) ([]Conflict, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	rb := &rollbacker{w: w, root: root, temps: newTempIndex(j.Records)}
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
			return nil, err
		}
		r := j.Records[i]
		var orig *tree.Entry
		if k, ok := removed[r.Step.Path]; ok && k < i {
			orig = j.Records[k].Step.Old
		}
		cf, err := rb.undo(r, orig)
		w.progress(PhaseRecover, len(j.Records)-i, len(j.Records))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
			continue
		}
		if cf != nil {
			if !keepExternal {
				return nil, &Error{Code: CodeInterruptedApply,
					Message:   fmt.Sprintf("an apply (%s) was interrupted and %s changed since; wtx will not overwrite it", j.OpID, quote.Path(cf.Path)),
					Conflicts: []Conflict{*cf},
					Repairs: []Repair{
						{Action: "recover", Detail: "after putting the path back, finish the rollback", Command: "wtx recover"},
						{Action: "keep", Detail: "keep the changed paths as they are and roll back the rest", Command: "wtx recover --rollback"},
					}}
			}
			conflicts = append(conflicts, *cf)
			// The path stays as it was changed; what the record left under
			// its temporary names goes (pre-images are in the blob store).
			d, err := root.OpenDir(tree.Parent(r.Step.Path))
			if err == nil {
				err = rb.removeTemps(d, r.Tmp)
				d.Close()
			} else if gone(err) {
				err = nil
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: remove temporary files: %w", quote.Path(r.Step.Path), err))
			}
		}
		failpoint.Hit("recover:undone")
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
		d, err := root.OpenDir(dir)
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
		at, err := entryIn(context.Background(), d, r.Step.Path, tree.Base(r.Step.Path), contentReader{})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quote.Path(r.Step.Path), err))
		} else if at.holds(r.Step.Old) {
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

type rollbacker struct {
	w     *Workspace
	root  *fsx.Root
	temps *tempIndex
}

// removeTemps unlinks the names in d that carry prefix (a record's Tmp).
func (rb *rollbacker) removeTemps(d *fsx.Dir, prefix string) error {
	names, err := rb.temps.of(d, prefix)
	if err != nil {
		return err
	}
	if err := removeNames(d, names); err != nil {
		return err
	}
	rb.temps.forget(d, prefix)
	return nil
}

// undo restores one record's pre-image if the path holds the post-image or
// an intermediate state the record explains; it returns a conflict if the
// path holds anything else, and an error if a step it needed failed (the
// path is then not restored). orig is the path's pre-image when an earlier
// record of the journal removes it (a type change): a path that still holds
// it was never reached by r.
func (rb *rollbacker) undo(r journal.Record, orig *tree.Entry) (*Conflict, error) {
	st := r.Step
	d, err := rb.root.OpenDir(tree.Parent(st.Path))
	if err != nil {
		made := st.Kind == tree.StepMkdir || st.Kind == tree.StepDirPerm || st.Old == nil
		if errors.Is(err, fs.ErrNotExist) && (made || st.New == nil) {
			return nil, nil // the directory it would live in is gone: nothing of it remains
		}
		notDir := errors.Is(err, fsx.ErrNotDir) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fsx.ErrSymlink)
		if made && notDir {
			return nil, nil // its directory is not (or no longer) one: nothing made here remains
		}
		if notDir || errors.Is(err, fs.ErrNotExist) {
			return &Conflict{Path: st.Path, Kind: "type-changed", Detail: err.Error()}, nil
		}
		return nil, fmt.Errorf("open its directory: %w", err)
	}
	defer d.Close()
	name := tree.Base(st.Path)
	at, err := entryIn(context.Background(), d, st.Path, name, contentReader{})
	if err != nil {
		return nil, err
	}
	cur, found := at.Entry, at.found()
	if orig != nil && found && tree.SameContent(cur, orig) {
		if st.Kind == tree.StepWrite || st.Kind == tree.StepSymlink {
			return nil, rb.removeTemps(d, r.Tmp)
		}
		return nil, nil
	}
	switch st.Kind {
	case tree.StepChmod:
		if found && cur.Type == tree.File && cur.Perm == st.New.Perm && cur.Digest == st.Old.Digest {
			if err := d.Chmod(name, fs.FileMode(st.Old.Perm)); err != nil {
				return nil, fmt.Errorf("chmod back to %04o: %w", st.Old.Perm, err)
			}
			return nil, nil
		}
		if found && tree.SameContent(cur, st.Old) {
			return nil, nil
		}
	case tree.StepDirPerm:
		if found && cur.Type == tree.Dir {
			if cur.Perm != st.Old.Perm {
				if err := d.Chmod(name, fs.FileMode(st.Old.Perm)); err != nil {
					return nil, fmt.Errorf("chmod back to %04o: %w", st.Old.Perm, err)
				}
			}
			return nil, nil
		}
		if !found {
			return nil, nil // made by a step undone later (mkdir)
		}
	case tree.StepMkdir:
		if !found {
			return nil, nil
		}
		if cur.Type == tree.Dir {
			err := opening(d, func() error { return d.Rmdir(name) })
			switch {
			case err == nil || errors.Is(err, fs.ErrNotExist):
				return nil, nil
			case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist):
				return &Conflict{Path: st.Path, Kind: "added-inside-deleted-dir", Detail: "wtx created this directory and something else was put in it after the crash"}, nil
			}
			return nil, fmt.Errorf("remove the directory the apply made: %w", err)
		}
	case tree.StepRmdir:
		if !found {
			if err := opening(d, func() error { return d.Mkdir(name, fs.FileMode(st.Old.Perm)) }); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return &Conflict{Path: st.Path, Kind: "created", Detail: err.Error()}, nil
				}
				return nil, fmt.Errorf("make the removed directory again: %w", err)
			}
			return nil, nil
		}
		if cur.Type == tree.Dir {
			return nil, nil
		}
	case tree.StepRemove:
		if found {
			if tree.SameContent(cur, st.Old) {
				return nil, rb.unlinkTemp(d, r.Tmp, r.Ident)
			}
			break
		}
		// Moved aside and still there?
		tst, err := d.Lstat(r.Tmp)
		if err == nil && tst.Ino == r.Ident.Ino {
			if err := opening(d, func() error { return d.RenameNoReplace(r.Tmp, d, name) }); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return &Conflict{Path: st.Path, Kind: "created", Detail: err.Error()}, nil
				}
				return nil, fmt.Errorf("move the pre-image back: %w", err)
			}
			return nil, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("look for the moved-aside pre-image: %w", err)
		}
		if err := rb.restore(d, name, st.Old); err != nil {
			return nil, fmt.Errorf("restore the pre-image: %w", err)
		}
		return nil, nil
	case tree.StepWrite, tree.StepSymlink:
		temps, err := rb.temps.of(d, r.Tmp)
		if err != nil {
			return nil, err
		}
		switch {
		case st.Old == nil && !found:
			return nil, removeNames(d, temps)
		case st.Old == nil && tree.SameContent(cur, st.New):
			if err := removeOpening(d, name, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove what the apply added: %w", err)
			}
			return nil, removeNames(d, temps)
		case st.Old != nil && found && tree.SameContent(cur, st.Old):
			return nil, removeNames(d, temps) // the exchange never happened
		case st.Old != nil && found && tree.SameContent(cur, st.New):
			for _, t := range temps {
				tst, err := d.Lstat(t)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("look for the displaced pre-image: %w", err)
				}
				if err == nil && tst.Ino == r.Ident.Ino {
					if err := opening(d, func() error { return d.Exchange(t, d, name) }); err != nil {
						return nil, fmt.Errorf("exchange the pre-image back: %w", err)
					}
					if err := removeOpening(d, t, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return nil, fmt.Errorf("remove the post-image: %w", err)
					}
					return nil, nil
				}
			}
			// The displaced pre-image is gone: rebuild it from the blob store.
			if err := removeOpening(d, name, d.Unlink); err != nil {
				return nil, fmt.Errorf("remove the post-image: %w", err)
			}
			if err := rb.restore(d, name, st.Old); err != nil {
				return nil, fmt.Errorf("restore the pre-image: %w", err)
			}
			return nil, nil
		case st.Old != nil && !found:
			for _, t := range temps {
				tst, err := d.Lstat(t)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("look for the displaced pre-image: %w", err)
				}
				if err == nil && tst.Ino == r.Ident.Ino {
					if err := opening(d, func() error { return d.RenameNoReplace(t, d, name) }); err != nil {
						if errors.Is(err, fs.ErrExist) {
							return &Conflict{Path: st.Path, Kind: "created", Detail: err.Error()}, nil
						}
						return nil, fmt.Errorf("move the pre-image back: %w", err)
					}
					return nil, rb.removeTemps(d, r.Tmp)
				}
			}
		}
	}
	cf := &Conflict{Path: st.Path, Kind: "modified", Base: sideDigest(st.Old), Current: "absent",
		Detail: "changed after the interrupted apply; left as it is"}
	if found {
		cf.Current = sideDigest(cur)
	}
	return cf, nil
}

func (rb *rollbacker) restore(d *fsx.Dir, name string, old *tree.Entry) error {
	// The directory may be one the op closed (its owner's write bit off):
	// it is opened for the while, as for the cleanup's removals.
	return opening(d, func() error { return restoreEntry(rb.w.blobs, d, name, old, rb.temps.restore) })
}

// unlinkTemp removes the moved-aside pre-image tmp if it is still the
// object the apply moved there.
func (rb *rollbacker) unlinkTemp(d *fsx.Dir, tmp string, ident tree.Stat) error {
	st, err := d.Lstat(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for the moved-aside pre-image: %w", err)
	}
	if st.Ino != ident.Ino {
		return nil
	}
	if err := removeOpening(d, tmp, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the moved-aside pre-image: %w", err)
	}
	return nil
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

// settleApplied settles the stage of an apply that committed just before a
// crash as the apply itself would have: its base moves over the paths the
// op wrote and over the selected paths that already held their staged
// state, and the stage is applied when nothing is left. A stage that is
// gone or already settled is left alone, as is any op but an apply (an
// undo names the stage of the op it reverses). It runs under the
// workspace lock.
//
// WTX_DISABLE=settle-forward (failpoint build) leaves the stage as the
// crash left it: the negative control of the roll-forward tests.
func (w *Workspace) settleApplied(ctx context.Context, rec opRecord) error {
	if rec.Op.Kind != "apply" || rec.Op.StageID == "" || failpoint.Disabled("settle-forward") {
		return nil
	}
	var body opBody
	if err := json.Unmarshal(rec.Op.Body, &body); err != nil {
		return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("journal of %s: damaged op body: %v; the op landed but its stage cannot be settled: the journal stays", rec.Op.ID, err),
			Repairs: []Repair{{Action: "check", Detail: "see what the state root holds", Command: "wtx fsck"}}}
	}
	s, err := w.Stage(ctx, rec.Op.StageID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.ID() != rec.Op.StageID || s.State() != StateOpen {
		return nil
	}
	cs, err := s.Changes(ctx, body.Paths)
	if err != nil {
		return err
	}
	applied := make([]tree.Change, 0, len(body.Changes))
	wrote := map[string]bool{}
	for _, c := range body.Changes {
		applied = append(applied, tree.Change{Path: c.Path, Old: fromEntryJSON(c.Path, c.Old), New: fromEntryJSON(c.Path, c.New)})
		wrote[c.Path] = true
	}
	root, err := w.openRoot()
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	var rest []tree.Change
	for _, c := range cs.changes {
		if !wrote[c.Path] {
			rest = append(rest, c)
		}
	}
	_, already, _, err := newCASReader(root, cs.base).check(ctx, rest)
	if err != nil {
		return err
	}
	return s.advanceBase(ctx, cs, append(applied, already...))
}

// sameWorkspace reports whether path, as recorded in a journal, names this
// workspace: the same path, a path this workspace was opened through (a bind
// mount that may not be visible here), or the same directory (device and
// inode) reached another way.
func (w *Workspace) sameWorkspace(path string) bool {
	if path == w.path {
		return true
	}
	if paths, err := w.db.WorkspacePaths(context.Background(), w.id); err == nil && slices.Contains(paths, path) {
		return true
	}
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := os.Stat(w.path)
	return err == nil && os.SameFile(a, b)
}
