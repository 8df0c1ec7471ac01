package wtx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A per-file op (write, edit, rm, and a read that first brings a path the
// stage never touched up to date with the workspace) changes one path of
// the stage's view and records one op. wtx may be killed at any instruction
// of it; the stage must then hold what its recorded ops describe: the state
// after the previous op, or this op recorded whole — never staged content
// that no op records (T-007). The op holds the stage's busy lock (shared)
// and the workspace lock from step 1 to step 5, so no other wtx command
// reads or changes the stage meanwhile, and runs in this order:
//
//  1. Settle. An op that a killed wtx left pending is finished or rolled
//     back (below) before the stage is read: when the busy lock is taken
//     (holdShared), and again once the workspace lock is held, for an op
//     another wtx began, and was killed in, while this one waited.
//  2. Prepare. Read the path's staged state (the before side), compute the
//     after side, store both contents in the blob store, and find the
//     directories above the path that a write must create. Every check
//     that can refuse the op runs here, before anything is recorded.
//     [fileop:prepared]
//  3. Intent. Record the op, numbered, with its Pending part: the path's
//     state in the view before and after, the prefix of its temporary
//     file, the directories it creates (and, for a read, the path's new
//     base). One database transaction. [fileop:intent]
//  4. Change. Write the new content to a temporary file in the path's
//     directory, its name starting with the recorded prefix, and rename it
//     over the path; or unlink the path (rm). The rename or the unlink is
//     the one instant the staged path changes. A read that brings the path
//     up to date then [fileop:view] writes its new base into the stage's
//     manifest. [fileop:changed]
//  5. Done. Clear the Pending part (a read records itself in the read set;
//     a read that found the path gone from the workspace leaves no op). One
//     database transaction. [fileop:done]
//
// Settling a pending op, under the same two locks, looks at its path in the
// view (settleFileOp):
//
//   - the path holds the after state: the change was made. Remove the
//     temporary files that start with the op's prefix, write a read's new
//     base, then do step 5: the op is recorded whole (rolled forward);
//   - it holds the before state: the change was never made. Remove those
//     temporary files and the directories the op created, then delete the
//     op (rolled back);
//   - anything else: something other than wtx changed the view while the op
//     was pending. Nothing is touched, and commands on the stage are
//     refused as io.corrupt, naming the op and the path, until drop-op
//     removes the op (its path gets back its before state) or the stage is
//     dropped.
//
// Nothing settling does before its last database write changes the path, so
// a settle that is itself killed is settled again the same way. Where the
// view is changed in a helper process (overlay), the helper dies with the
// wtx that started it: no change lands after its wtx was killed.
//
// WTX_DISABLE=fileop-intent (the negative control of T-007) changes the view
// first and records the op afterwards, with no intent;
// WTX_DISABLE=fileop-settle-locked settles only when the busy lock is taken.

// TxIntent is the Pending part of a per-file op: what settling a killed op
// needs to tell whether its change was made, and to clean up after it.
type TxIntent struct {
	// Before and After are the path's state in the view before and after
	// the op (nil: absent).
	Before *Side `json:"before"`
	After  *Side `json:"after"`
	// Temp starts the name of the op's temporary file in the path's
	// directory.
	Temp string `json:"temp"`
	// Refresh is set on a read that brings the path up to date with the
	// workspace: Base is then the path's new base (nil: the path left the
	// workspace, and the base with it).
	Refresh bool  `json:"refresh,omitempty"`
	Base    *Side `json:"base,omitempty"`
	// DirMode is the permission bits of the directories such a read
	// brings into the view (the op's Mkdirs) and into the base.
	DirMode string `json:"dir_mode,omitempty"`
}

// pendingWord is how a pending op's record spells its Pending part
// (encoding/json, which never escapes these letters): only records that
// hold it are read out when the next command looks for pending ops.
const pendingWord = `"pending":{`

// fileOpKinds are the kinds of op that settleFileOps looks at.
var fileOpKinds = []string{"write", "edit", "rm", "read"}

// newIntent returns the Pending part of an op that takes the path from
// before to after in the view, with a temporary-name prefix of its own.
func newIntent(before, after *Side) (*TxIntent, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, AsError(err)
	}
	return &TxIntent{Before: before, After: after, Temp: tempPrefix + "op-" + hex.EncodeToString(b[:]) + "-"}, nil
}

// commitFileOp runs steps 3 to 5 for op, whose Pending part is set: change
// makes the op's change to the view, done (optional) adds to step 5's
// transaction. res gets the op's number. Once the op is recorded an
// interrupt no longer stops it: it is finished or rolled back here.
func (s *Stage) commitFileOp(ctx context.Context, op TxOp, res *FileResult, change func(context.Context) error, done func(tx *state.Txn, seq int) error) error {
	if failpoint.Disabled("fileop-intent") {
		// Negative control: the view first, the record after.
		if err := change(ctx); err != nil {
			return err
		}
		failpoint.Hit("fileop:changed")
		return s.keepFileOp(ctx, op, res, done)
	}
	failpoint.Hit("fileop:prepared")
	if err := s.recordTxOp(ctx, op, res, nil); err != nil {
		return err
	}
	op.Seq = res.TxOp
	failpoint.Hit("fileop:intent")
	ctx = context.WithoutCancel(ctx)
	if err := change(ctx); err != nil {
		// All of the change was made or none of it: settling says which,
		// and finishes or rolls back the op.
		forward, serr := s.settleFileOp(ctx, op)
		switch {
		case serr != nil:
			return errors.Join(err, serr)
		case !forward:
			return err
		}
		return nil
	}
	failpoint.Hit("fileop:changed")
	return s.finishFileOp(ctx, op, done)
}

// keepFileOp records op without a Pending part (the negative control): a
// read that found its path gone records nothing.
func (s *Stage) keepFileOp(ctx context.Context, op TxOp, res *FileResult, done func(tx *state.Txn, seq int) error) error {
	in := op.Pending
	op.Pending = nil
	if in.Refresh && in.After == nil {
		return nil
	}
	return s.recordTxOp(ctx, op, res, done)
}

// finishFileOp is step 5 for op (numbered): its Pending part is cleared in
// one transaction with done. A read whose path left the workspace is
// deleted instead: it read nothing.
func (s *Stage) finishFileOp(ctx context.Context, op TxOp, done func(tx *state.Txn, seq int) error) error {
	in := op.Pending
	op.Pending = nil
	if op.Kind == "read" {
		op.Mkdirs = nil // in the base now: no drop-op takes them out
	}
	body, err := json.Marshal(op)
	if err != nil {
		return AsError(err)
	}
	err = s.ws.db.Tx(ctx, func(tx *state.Txn) error {
		if in != nil && in.Refresh && in.After == nil {
			return tx.DeleteTxOpsFrom(ctx, s.ID(), op.Seq)
		}
		if err := tx.UpdateTxOpBody(ctx, s.ID(), op.Seq, body); err != nil {
			return err
		}
		if done != nil {
			return done(tx, op.Seq)
		}
		return nil
	})
	if err != nil {
		return AsError(err)
	}
	failpoint.Hit("fileop:done")
	return nil
}

// pendingFileOps lists the stage's per-file ops left pending.
func (s *Stage) pendingFileOps(ctx context.Context) ([]TxOp, error) {
	rows, err := s.ws.db.ListTxOpsWith(ctx, s.ID(), fileOpKinds, pendingWord)
	if err != nil {
		return nil, AsError(err)
	}
	var out []TxOp
	for _, r := range rows {
		var op TxOp
		if err := decodeTxOp(r.Body, &op); err != nil {
			return nil, &Error{Code: CodeCorrupt, Message: fmt.Sprintf("op %d of %s is damaged: %v", r.Seq, s.ID(), err)}
		}
		if op.Pending != nil {
			op.Seq = r.Seq
			out = append(out, op)
		}
	}
	return out, nil
}

// discardKey marks a context whose command discards the stage's ops from
// a number on (drop-op N; 0: the whole stage, drop): settling leaves a
// pending op among them to that command.
type discardKey struct{}

// discarding returns ctx marked as discarding the stage's ops from seq on.
func discarding(ctx context.Context, seq int) context.Context {
	return context.WithValue(ctx, discardKey{}, seq)
}

// discarded reports whether ctx's command discards op seq, of kind: a
// read's refresh moved the base, which only settling puts right, so a read
// is left to a command that drops the whole stage.
func discarded(ctx context.Context, seq int, kind string) bool {
	from, ok := ctx.Value(discardKey{}).(int)
	return ok && (from == 0 || seq >= from && kind != "read")
}

// settleFileOps finishes or rolls back every per-file op of the stage that
// a killed wtx left pending, under the workspace lock (see above). The
// caller holds the busy lock; a command that discards such an op leaves it
// to itself.
func (s *Stage) settleFileOps(ctx context.Context) error {
	if from, ok := ctx.Value(discardKey{}).(int); ok && from == 0 {
		return nil // the whole stage goes, whatever its records hold
	}
	pending, err := s.pendingFileOps(ctx)
	if err != nil || len(pending) == 0 {
		return err
	}
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Again under the lock: an op in progress in another process held it,
	// and is done now.
	return s.settlePending(ctx)
}

// settleFileOpsLocked is settleFileOps for a caller that holds the
// workspace lock: a command that took the lock after holdShared settles
// again, for an op another wtx began, and was killed in, while this one
// waited for the lock.
func (s *Stage) settleFileOpsLocked(ctx context.Context) error {
	if from, ok := ctx.Value(discardKey{}).(int); ok && from == 0 || failpoint.Disabled("fileop-settle-locked") {
		return nil // the whole stage goes; or the negative control
	}
	return s.settlePending(ctx)
}

// settlePending settles the stage's pending ops; the caller holds the
// workspace lock.
func (s *Stage) settlePending(ctx context.Context) error {
	pending, err := s.pendingFileOps(ctx)
	if err != nil || len(pending) == 0 {
		return err
	}
	ops, err := s.TxOps(ctx)
	if err != nil {
		return err
	}
	for i := len(pending) - 1; i >= 0; i-- {
		op := pending[i]
		if discarded(ctx, op.Seq, op.Kind) {
			continue
		}
		if op.Seq != ops[len(ops)-1].Seq {
			return s.strayError(op, fmt.Sprintf("op %d is not the stage's last op", op.Seq))
		}
		if _, err := s.settleFileOp(ctx, op); err != nil {
			return err
		}
		ops = ops[:len(ops)-1]
	}
	return nil
}

// settleFileOp finishes (forward) or rolls back op, found pending. The
// caller holds the busy lock (shared) and the workspace lock.
func (s *Stage) settleFileOp(ctx context.Context, op TxOp) (forward bool, err error) {
	in := op.Pending
	if len(op.Files) != 1 {
		return false, s.strayError(op, "its record names no single path")
	}
	p := op.Files[0].Path
	v, err := s.view(ctx)
	if err != nil {
		return false, err
	}
	defer v.Close()
	cur, _, err := stagedFile(v, p)
	var e *Error
	switch {
	case err != nil && errors.As(err, &e) && (e.Code == CodeBoundary || e.Code == CodeSpecialFile):
		return false, s.strayError(op, fmt.Sprintf("%s is no longer a regular file in the stage", quote.Path(p)))
	case err != nil:
		return false, err
	case sameSide(cur, in.After):
		forward = true
	case sameSide(cur, in.Before):
	default:
		return false, s.strayError(op, fmt.Sprintf("%s holds neither what it held before the op nor what the op wrote", quote.Path(p)))
	}
	what := fmt.Sprintf("settle op %d of %s", op.Seq, s.ID())
	if err := s.removeDebris(ctx, v, op, !forward, what); err != nil {
		return false, err
	}
	failpoint.Hit("fileop:settle-clean")
	if !forward {
		return false, AsErrorOrNil(s.ws.db.DeleteTxOpsFrom(ctx, s.ID(), op.Seq))
	}
	if in.Refresh {
		var dirs []tree.Entry
		for _, d := range op.Mkdirs {
			dirs = append(dirs, *entryOfSide(d, &Side{Type: "dir", Mode: in.DirMode}))
		}
		if err := s.putBase(p, entryOfSide(p, in.Base), dirs); err != nil {
			return false, err
		}
	}
	var done func(tx *state.Txn, seq int) error
	if op.Kind == "read" {
		done = s.readDone(ctx, p, in.After)
	}
	return true, s.finishFileOp(ctx, op, done)
}

// removeDebris removes from the view the temporary files op's prefix names
// in its path's directory and, when rolling back, the directories the op
// created.
func (s *Stage) removeDebris(ctx context.Context, v stage.View, op TxOp, back bool, what string) error {
	m, err := s.manifest()
	if err != nil {
		return err
	}
	cur, err := v.Scan(ctx, m, s.exclude)
	if err != nil {
		return stagingError(err)
	}
	now := &tree.Manifest{Entries: cur}
	dir := tree.Parent(op.Files[0].Path)
	gone := map[string]*tree.Entry{}
	for _, e := range cur {
		if tree.Parent(e.Path) == dir && e.Type != tree.Dir && strings.HasPrefix(tree.Base(e.Path), op.Pending.Temp) {
			gone[e.Path] = nil
		}
	}
	if back {
		for _, d := range op.Mkdirs {
			if e := now.Lookup(d); e != nil && e.Type == tree.Dir {
				gone[d] = nil
			}
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return s.restoreView(ctx, v, gone, what)
}

// strayError refuses a stage whose pending op cannot be settled: something
// other than wtx changed the view while it was pending.
func (s *Stage) strayError(op TxOp, why string) *Error {
	var paths []string
	for _, f := range op.Files {
		paths = append(paths, f.Path)
	}
	return &Error{Code: CodeCorrupt,
		Message: fmt.Sprintf("stage %s: op %d (%s) was stopped halfway, and cannot be finished or rolled back: %s; something other than wtx changed the stage; nothing was changed",
			s.ID(), op.Seq, strings.Join(op.Argv, " "), why),
		Conflicts: conflictsOf(paths, "unrecorded"),
		Repairs: []Repair{
			{Action: RepairDropOp, Stage: s.ID(), TxOp: op.Seq, Paths: paths,
				Detail: fmt.Sprintf("drop op %d: its paths get back what they held before it, whatever is there now is lost", op.Seq)},
			{Action: RepairRestage, Stage: s.ID(), Detail: "drop the stage and redo its work"},
		}}
}

func conflictsOf(paths []string, kind string) []Conflict {
	out := make([]Conflict, len(paths))
	for i, p := range paths {
		out[i] = Conflict{Path: p, Kind: kind}
	}
	return out
}

// sameSide reports whether a path's state in the view is side (nil:
// absent): same type, permission bits and content.
func sameSide(cur, side *Side) bool {
	if cur == nil || side == nil {
		return cur == nil && side == nil
	}
	return cur.Type == side.Type && cur.Mode == side.Mode && cur.Digest == side.Digest
}

// missingDirs lists the directories above rel that the view lacks, parents
// first: a write to rel creates them. Nothing is listed where the write
// will fail (a file or a symlink in the way).
func missingDirs(v stage.View, rel string) ([]string, error) {
	var missing []string
	for d := tree.Parent(rel); d != "." && d != ""; d = tree.Parent(d) {
		f, err := v.OpenFile(d)
		switch {
		case err == nil:
			f.Close()
			return nil, nil // a file in the way: the write fails
		case errors.Is(err, fs.ErrNotExist):
			missing = append([]string{d}, missing...)
			continue
		case errors.Is(err, fsx.ErrSymlink):
			return nil, nil // refused by the write
		case errors.Is(err, fsx.ErrNotRegular), errors.Is(err, fsx.ErrCrossDevice), errors.Is(err, fsx.ErrNotDir):
			return missing, nil // a directory (or what the write fails on)
		default:
			return nil, AsError(err)
		}
	}
	return missing, nil
}

// readDone records a read of path with side in the read set (in step 5,
// which an interrupt does not stop).
func (s *Stage) readDone(ctx context.Context, path string, side *Side) func(tx *state.Txn, seq int) error {
	ctx = context.WithoutCancel(ctx)
	return func(tx *state.Txn, seq int) error {
		if side == nil {
			return nil
		}
		return tx.PutRead(ctx, state.Read{StageID: s.ID(), Path: path, Digest: side.Digest, Seq: seq, ReadAt: s.ws.now().UTC()})
	}
}

// putBase makes e the base entry of path in the stage's manifest (nil: the
// path has none), with the directories dirs. An entry the manifest holds
// already with the same content is kept with its stat tuples.
func (s *Stage) putBase(path string, e *tree.Entry, dirs []tree.Entry) error {
	m, err := s.manifest()
	if err != nil {
		return err
	}
	put := map[string]*tree.Entry{path: e}
	for i := range dirs {
		put[dirs[i].Path] = &dirs[i]
	}
	for p, want := range put {
		if have := m.Lookup(p); want == nil && have == nil || want != nil && have != nil && tree.SameContent(have, want) {
			delete(put, p)
		}
	}
	if len(put) == 0 {
		return nil
	}
	next := make([]tree.Entry, 0, len(m.Entries)+len(put))
	for _, x := range m.Entries {
		if _, ok := put[x.Path]; !ok {
			next = append(next, x)
		}
	}
	for _, want := range put {
		if want != nil {
			next = append(next, *want)
		}
	}
	tree.SortEntries(next)
	m.Entries = next
	return AsErrorOrNil(s.ws.writeManifest(s.ID(), m))
}
