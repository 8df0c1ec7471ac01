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

	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/failpoint"
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
	temps := engine.FindTemps(w.path, 10)
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
	if err := w.engineStore(root, nil).RollForward(ctx, j); err != nil {
		return "", w.engineError(err)
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

// rollbackJournal puts every path of the uncommitted op j back to its
// pre-image (engine.Store.RollBack): a path changed since is never
// overwritten, unless keepExternal keeps it as it is and returns it.
func (w *Workspace) rollbackJournal(ctx context.Context, j *journal.Journal, keepExternal bool) ([]Conflict, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	kept, err := w.engineStore(root, nil).RollBack(ctx, j, keepExternal)
	if err != nil {
		return nil, w.engineError(err)
	}
	return engineConflicts(kept), nil
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
