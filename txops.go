package wtx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// TxOp is one per-file operation inside a stage (or a command run in it),
// numbered from 1.
type TxOp struct {
	Seq     int       `json:"tx_op"`
	Kind    string    `json:"kind"` // write, edit, rm, read, run
	Argv    []string  `json:"argv" jsonname:"b64"`
	Created time.Time `json:"created"`
	// Files are the paths the op touched, with their staged state before
	// and after it (nil: absent).
	Files []TxFile `json:"files"`
	// Edit's arguments, for rebase.
	Old        string `json:"old,omitempty" jsonname:"b64"`
	New        string `json:"new,omitempty" jsonname:"b64"`
	All        bool   `json:"all,omitempty"`
	ExpectHash string `json:"expect_hash,omitempty"`
	// Status is a run's: RunRunning from before its command starts until
	// its change set is recorded, then RunDone, or RunCancelled when the
	// caller stopped it (an MCP call cancelled, a deadline); RunInterrupted
	// when the stage was found free with the run unfinished (its wtx was
	// killed). Empty for per-file ops and for runs recorded before runs had
	// one.
	Status string `json:"status,omitempty"`
	// Signal names the signal that ended a run's command (SIGTERM, …),
	// empty when it exited.
	Signal string `json:"signal,omitempty"`
	// Checkpoint is set on a run whose Files are every path its command
	// changed in the view, with the entry before and after it; the file
	// contents of both sides are kept in the blob store where they could
	// be read (see Stage.Run). Such a run can be dropped (drop-op) and its
	// changes merged (rebase --merge) like a per-file op's. A run without
	// it (interrupted, or recorded before runs kept their changes) cannot.
	Checkpoint bool `json:"checkpoint,omitempty"`
	// Mkdirs are the directories above its path that a write created,
	// parents first: drop-op removes them with it.
	Mkdirs []string `json:"mkdirs,omitempty" jsonname:"b64"`
	// Pending is set on a per-file op from the moment it is recorded until
	// its change to the view is made; an op found pending is one whose wtx
	// was stopped halfway, which the next command settles (fileop.go).
	Pending *TxIntent `json:"pending,omitempty"`
	// Flow names the flow step attempt that made the op (its stage's
	// name), empty for an op a person or an agent made.
	Flow string `json:"flow,omitempty"`
}

// MarshalJSON writes the op with byte-safe arguments and edit texts.
func (op TxOp) MarshalJSON() ([]byte, error) { return jsonname.Marshal(op) }

// UnmarshalJSON reads what MarshalJSON writes.
func (op *TxOp) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, op) }

// decodeTxOp reads a tx op's record in one pass over its bytes, files and
// all (json.Unmarshal would scan them once more before UnmarshalJSON).
func decodeTxOp(data []byte, op *TxOp) error { return jsonname.Unmarshal(data, op) }

// Statuses of a run op.
const (
	RunRunning     = "running"
	RunDone        = "done"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted"
)

// TxFile is one path a TxOp touched.
type TxFile struct {
	Path   string `json:"path" jsonname:"b64"`
	Before *Side  `json:"before"`
	After  *Side  `json:"after"`
}

// MarshalJSON writes the file with a byte-safe path.
func (f TxFile) MarshalJSON() ([]byte, error) { return jsonname.Marshal(f) }

// UnmarshalJSON reads what MarshalJSON writes.
func (f *TxFile) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, f) }

// FileResult answers a per-file operation.
type FileResult struct {
	TxOp   int    `json:"tx_op"`
	Path   string `json:"path" jsonname:"b64"`
	Digest string `json:"digest,omitempty"` // the content now staged (or read)
	Size   int64  `json:"size"`
	// Before is the digest the path held in the stage before the op
	// ("absent" when it did not exist).
	Before string `json:"before,omitempty"`
	// Content is what a read returned.
	Content []byte `json:"-"`
	// Changes holds the op's change to the stage as a change object
	// (empty for a read): action and after-state relative to what the
	// stage held before the op.
	Changes []Change `json:"changes" jsonname:"nonnil"`
	// Strategy says how the change reaches the workspace (StrategyStaged
	// for per-file ops; "" for a read).
	Strategy string `json:"strategy,omitempty"`
}

// MarshalJSON writes the result with a byte-safe path.
func (r FileResult) MarshalJSON() ([]byte, error) { return jsonname.Marshal(r) }

// How a change reaches the workspace: the "strategy" of a write answer.
const (
	// StrategyStaged: held in the stage; the workspace is untouched until
	// the stage is applied (or never, if it is dropped).
	StrategyStaged = "staged"
	// StrategyJournaled: written now, all or nothing: each file through a
	// temporary name in its own directory, synced and renamed into place,
	// under a journal that recovery finishes or rolls back.
	StrategyJournaled = "journaled"
)

// fileOpChange is the change object of one per-file op: before and after are
// the path's staged state around the op (nil: absent).
func fileOpChange(path string, before, after *Side) Change {
	c := Change{Path: path}
	switch {
	case before == nil && after == nil:
		return c
	case before == nil:
		c.Action = "added"
	case after == nil:
		c.Action = "deleted"
	default:
		c.Action = "modified"
	}
	if before != nil {
		b := *before
		c.Before = &b
	}
	if after != nil {
		c.Type, c.Mode, c.Digest = after.Type, after.Mode, after.Digest
		size := after.Size
		c.Size = &size
		c.Target = after.Target
	}
	return c
}

// WriteOptions guard and shape a write.
type WriteOptions struct {
	// ExpectHash refuses the write (refusal.stale-read) unless the staged
	// file's digest is still this one (the digest a read returned).
	ExpectHash string
	// Perm is the permission bits of a new file (0644 when zero); an
	// existing file keeps its own.
	Perm fs.FileMode
}

// validOpPath checks a per-file operation's path (C-001).
func validOpPath(p string) error {
	if err := fsx.ValidRel(p); err != nil || p == "." {
		msg := fmt.Sprintf("path %q is outside the workspace or not a clean relative path", p)
		if err != nil {
			msg = fmt.Sprintf("path %q: %v", p, err)
		}
		return &Error{Code: CodeBoundary, Message: msg,
			Conflicts: []Conflict{{Path: p, Kind: "boundary"}}}
	}
	return nil
}

// stagedFile reads what the stage holds at rel: (nil, nil) when absent.
func stagedFile(v stage.View, rel string) (*Side, []byte, error) {
	f, err := v.OpenFile(rel)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case errors.Is(err, fsx.ErrSymlink):
		return nil, nil, &Error{Code: CodeBoundary, Message: fmt.Sprintf("%s is or goes through a symlink in the stage; per-file operations never follow links", quote.Path(rel)),
			Conflicts: []Conflict{{Path: rel, Kind: "symlink"}}}
	case errors.Is(err, fsx.ErrNotRegular):
		return nil, nil, errorf(CodeSpecialFile, "%s is not a regular file in the stage", quote.Path(rel))
	default:
		return nil, nil, AsError(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, AsError(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, AsError(err)
	}
	return &Side{Type: "file", Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), Size: int64(len(data)), Digest: string(blob.Sum(data))}, data, nil
}

// fileOps returns the view's per-file interface.
func (s *Stage) fileOps(ctx context.Context) (stage.View, stage.FileOps, error) {
	if err := s.checkUsable(); err != nil {
		return nil, nil, err
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, nil, err
	}
	fo, ok := v.(stage.FileOps)
	if !ok {
		fo = stage.ExecFileOps(v)
	}
	return v, fo, nil
}

// lockedFileOps takes the workspace lock and opens the stage's view for
// per-file operations; release closes the view and unlocks.
// A stage that a run holds is refused (refusal.stage-busy): its view is
// the run's, and an overlay would be mounted twice on one upper directory.
func (s *Stage) lockedFileOps(ctx context.Context, what string) (stage.View, stage.FileOps, func(), error) {
	if err := s.checkUsable(); err != nil {
		return nil, nil, nil, err
	}
	release, err := s.holdShared(ctx, what)
	if err != nil {
		return nil, nil, nil, err
	}
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	if err := s.reload(ctx); err != nil {
		unlock()
		release()
		return nil, nil, nil, err
	}
	if err := s.settleFileOpsLocked(ctx); err != nil {
		unlock()
		release()
		return nil, nil, nil, err
	}
	v, fo, err := s.fileOps(ctx)
	if err != nil {
		unlock()
		release()
		return nil, nil, nil, err
	}
	return v, fo, func() { v.Close(); unlock(); release() }, nil
}

// Read returns the staged content of path and records it in the stage's
// read set: if the workspace's copy changes before apply, the apply is
// refused (refusal.stale-read). Reading again refreshes the record.
func (s *Stage) Read(ctx context.Context, path string) (*FileResult, error) {
	if err := s.checkOpPath(path); err != nil {
		return nil, err
	}
	v, fo, release, err := s.lockedFileOps(ctx, "a per-file read")
	if err != nil {
		return nil, err
	}
	defer release()
	side, data, err := stagedFile(v, path)
	if err != nil {
		return nil, err
	}
	rf, err := s.planRefresh(ctx, v, path, side)
	if err != nil {
		return nil, err
	}
	if rf != nil {
		return s.refreshAndRead(ctx, v, fo, path, side, rf)
	}
	if side == nil {
		return nil, errorf(CodeFileNotFound, "%s does not exist in stage %s", quote.Path(path), s.ID())
	}
	res := &FileResult{Path: path, Digest: side.Digest, Size: side.Size, Before: side.Digest, Content: data, Changes: []Change{}}
	// Kept, so that if the workspace's copy changes before apply (a stale
	// read), 'diff --drift' can show what changed since the read.
	if _, err := s.ws.blobs.PutBytes(ctx, data); err != nil {
		return nil, AsError(err)
	}
	err = s.recordTxOp(ctx, readOp(path, side), res, s.readDone(ctx, path, side))
	return res, err
}

// readOp is the op of a read of path that found side.
func readOp(path string, side *Side) TxOp {
	return TxOp{Kind: "read", Argv: []string{"read", path}, Files: []TxFile{{Path: path, Before: side, After: side}}}
}

// Write stages data as the content of path.
func (s *Stage) Write(ctx context.Context, path string, data []byte, opts WriteOptions) (*FileResult, error) {
	op := TxOp{Kind: "write", Argv: []string{"write", path}, ExpectHash: opts.ExpectHash, Flow: s.flowAttempt}
	return s.change(ctx, path, op, opts.ExpectHash, func(before []byte, exists bool) ([]byte, error) { return data, nil }, opts.Perm)
}

// Edit replaces the exact text old with new in the staged file path: it
// must occur exactly once, or any number of times (at least one) with all.
func (s *Stage) Edit(ctx context.Context, path, old, new string, all bool, expectHash string) (*FileResult, error) {
	if old == "" {
		return nil, errorf(CodeUsage, "edit %s: --old must not be empty", path)
	}
	op := TxOp{Kind: "edit", Argv: []string{"edit", path}, Old: old, New: new, All: all, ExpectHash: expectHash, Flow: s.flowAttempt}
	return s.change(ctx, path, op, expectHash, func(before []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, errorf(CodeFileNotFound, "edit %s: no such file in stage %s", quote.Path(path), s.ID())
		}
		return applyEdit(path, before, old, new, all)
	}, 0)
}

// Remove deletes path from the stage.
func (s *Stage) Remove(ctx context.Context, path string, expectHash string) (*FileResult, error) {
	op := TxOp{Kind: "rm", Argv: []string{"rm", path}, ExpectHash: expectHash, Flow: s.flowAttempt}
	return s.change(ctx, path, op, expectHash, func(before []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, errorf(CodeFileNotFound, "rm %s: no such file in stage %s", quote.Path(path), s.ID())
		}
		return nil, nil
	}, 0)
}

// applyEdit performs one exact-text edit, refusing zero matches and, without
// all, several.
func applyEdit(path string, content []byte, old, new string, all bool) ([]byte, error) {
	n := bytes.Count(content, []byte(old))
	switch {
	case n == 0:
		return nil, &Error{Code: CodeEditNoMatch, Message: fmt.Sprintf("edit %s: the old text matches 0 times", quote.Path(path))}
	case n > 1 && !all:
		return nil, &Error{Code: CodeEditAmbiguous,
			Message: fmt.Sprintf("edit %s: the old text matches %d times, at lines %s; give it more context, or ask to replace every match", quote.Path(path), n, matchLines(content, old))}
	}
	if all {
		return bytes.ReplaceAll(content, []byte(old), []byte(new)), nil
	}
	return bytes.Replace(content, []byte(old), []byte(new), 1), nil
}

func matchLines(content []byte, old string) string {
	var lines []string
	off := 0
	for {
		i := bytes.Index(content[off:], []byte(old))
		if i < 0 {
			break
		}
		lines = append(lines, fmt.Sprint(bytes.Count(content[:off+i], []byte("\n"))+1))
		off += i + len(old)
		if len(lines) == 10 {
			lines = append(lines, "…")
			break
		}
	}
	return strings.Join(lines, ", ")
}

// change runs a content-changing per-file op: compute is given the staged
// content (and whether the file exists) and returns the new content (nil
// with no error for a deletion). The op follows the protocol of fileop.go.
func (s *Stage) change(ctx context.Context, path string, op TxOp, expectHash string, compute func([]byte, bool) ([]byte, error), perm fs.FileMode) (*FileResult, error) {
	if err := s.checkOpPath(path); err != nil {
		return nil, err
	}
	v, fo, release, err := s.lockedFileOps(ctx, op.Kind)
	if err != nil {
		return nil, err
	}
	defer release()
	before, data, err := stagedFile(v, path)
	if err != nil {
		return nil, err
	}
	if err := s.checkExpected(path, expectHash, before); err != nil {
		return nil, err
	}
	next, err := compute(data, before != nil)
	if err != nil {
		return nil, err
	}
	res := &FileResult{Path: path, Before: "absent"}
	if before != nil {
		res.Before = before.Digest
		if perm == 0 {
			// A mode that is not octal (a damaged record) leaves perm 0,
			// and the default below applies.
			_, _ = fmt.Sscanf(before.Mode, "%o", &perm)
		}
	}
	if perm == 0 {
		perm = 0o644
	}
	// Both contents are kept before the op is recorded: drop-op puts the
	// before side back from the record alone.
	var after *Side
	if op.Kind != "rm" {
		d, err := s.ws.blobs.PutBytes(ctx, next)
		if err != nil {
			return nil, AsError(err)
		}
		after = &Side{Type: "file", Mode: fmt.Sprintf("%04o", perm), Size: int64(len(next)), Digest: string(d)}
		res.Digest, res.Size = after.Digest, after.Size
		if op.Mkdirs, err = missingDirs(v, path); err != nil {
			return nil, err
		}
	}
	if data != nil {
		if _, err := s.ws.blobs.PutBytes(ctx, data); err != nil {
			return nil, AsError(err)
		}
	}
	if op.Pending, err = newIntent(before, after); err != nil {
		return nil, err
	}
	op.Files = []TxFile{{Path: path, Before: before, After: after}}
	res.Changes, res.Strategy = []Change{fileOpChange(path, before, after)}, StrategyStaged
	err = s.commitFileOp(ctx, op, res, func(ctx context.Context) error {
		if after == nil {
			return s.fileOpError(path, fo.Remove(ctx, path))
		}
		return s.fileOpError(path, fo.WriteFileTemp(ctx, path, op.Pending.Temp, next, perm, 0))
	}, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// checkExpected refuses an op whose expected hash is no longer the staged
// file's (refusal.stale-read).
func (s *Stage) checkExpected(path, expectHash string, before *Side) error {
	if expectHash == "" {
		return nil
	}
	got := "absent"
	if before != nil {
		got = before.Digest
	}
	if got == expectHash {
		return nil
	}
	return &Error{Code: CodeStaleRead,
		Message:   fmt.Sprintf("%s changed in stage %s since it was read (expected %s, now %s)", quote.Path(path), s.ID(), expectHash, got),
		Conflicts: []Conflict{{Path: path, Kind: "expect-hash", Base: expectHash, Current: got}},
		Repairs:   []Repair{{Action: RepairReread, Detail: "read the file again and redo the change", Stage: s.ID(), Paths: []string{path}}}}
}

func (s *Stage) fileOpError(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fsx.ErrSymlink):
		return &Error{Code: CodeBoundary, Message: fmt.Sprintf("%s is or goes through a symlink in the stage; per-file operations never follow links", quote.Path(path)),
			Conflicts: []Conflict{{Path: path, Kind: "symlink"}}}
	case errors.Is(err, stage.ErrIsDir), errors.Is(err, fsx.ErrNotDir):
		return errorf(CodeUsage, "%s: %v", quote.Path(path), err)
	}
	return AsError(err)
}

// recordTxOp numbers op and stores it (with extra, in one transaction).
func (s *Stage) recordTxOp(ctx context.Context, op TxOp, res *FileResult, extra func(tx *state.Txn, seq int) error) error {
	if op.Flow == "" {
		op.Flow = s.flowAttempt
	}
	if op.Created.IsZero() {
		op.Created = s.ws.now().UTC()
	}
	return AsErrorOrNil(s.ws.db.Tx(ctx, func(tx *state.Txn) error {
		seq, err := tx.NextTxOpSeq(ctx, s.ID())
		if err != nil {
			return err
		}
		op.Seq = seq
		body, err := json.Marshal(op)
		if err != nil {
			return err
		}
		if err := tx.InsertTxOp(ctx, state.TxOp{StageID: s.ID(), Seq: seq, Kind: op.Kind, Body: body, CreatedAt: op.Created}); err != nil {
			return err
		}
		if res != nil {
			res.TxOp = seq
		}
		if extra != nil {
			return extra(tx, seq)
		}
		return nil
	}))
}

// AsErrorOrNil is AsError that keeps nil as a nil error.
func AsErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return AsError(err)
}

// TxOps lists the stage's per-file ops and runs, in order.
func (s *Stage) TxOps(ctx context.Context) ([]TxOp, error) {
	rows, err := s.ws.db.ListTxOps(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]TxOp, 0, len(rows))
	for _, r := range rows {
		var op TxOp
		if err := decodeTxOp(r.Body, &op); err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("op %d of %s is damaged: %v", r.Seq, s.ID(), err)}
		}
		out = append(out, op)
	}
	return out, nil
}

// DropOps removes op n and every later op of the stage: each path they
// touched gets back its staged state from before op n — a command run's
// paths too, from what the run recorded (see checkpoint.go). A run that
// recorded no checkpoint (its wtx was killed, or it predates them) cannot
// be dropped. Nothing is changed unless every content to put back is kept.
func (s *Stage) DropOps(ctx context.Context, n int) ([]string, error) {
	r, err := s.DropTxOps(ctx, n)
	if err != nil {
		return nil, err
	}
	return r.Restored, nil
}

// DropOpsResult says what DropTxOps dropped.
type DropOpsResult struct {
	// Dropped are the numbers (tx_op) of the ops removed, in order.
	Dropped []int
	// Restored are the paths that got back their staged state from before
	// the first of them.
	Restored []string
}

// DropTxOps is DropOps, saying which ops went.
func (s *Stage) DropTxOps(ctx context.Context, n int) (*DropOpsResult, error) {
	if err := s.ws.authorize(ActionDrop, false); err != nil {
		return nil, err
	}
	if err := s.checkUsable(); err != nil {
		return nil, err
	}
	// An op left pending among those dropped is dropped, not settled.
	ctx = discarding(ctx, n)
	release, err := s.holdShared(ctx, "drop-op")
	if err != nil {
		return nil, err
	}
	defer release()
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.settleFileOpsLocked(ctx); err != nil {
		return nil, err
	}
	if err := s.reload(ctx); err != nil {
		return nil, err
	}
	if err := s.checkUsable(); err != nil {
		return nil, err
	}
	ops, err := s.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > len(ops) {
		return nil, errorf(CodeTxOpNotFound, "stage %s has no op %d (it has %d)", s.ID(), n, len(ops))
	}
	restore := map[string]*tree.Entry{}
	var order []string
	for _, op := range ops[n-1:] {
		if op.Kind == "run" && !op.Checkpoint {
			why := "it was recorded before wtx kept what a command changed"
			if op.Status == RunInterrupted || op.Status == RunRunning {
				why = "its wtx was stopped before it recorded what the command changed"
			}
			return nil, errorf(CodeUnsupported, "op %d of %s is a command run that cannot be dropped path by path: %s; drop the stage instead", op.Seq, s.ID(), why)
		}
		for _, f := range op.Files {
			if _, seen := restore[f.Path]; !seen {
				restore[f.Path] = entryOfSide(f.Path, f.Before)
				order = append(order, f.Path)
			}
		}
		// The directories a write created did not exist before it.
		for _, d := range op.Mkdirs {
			if _, seen := restore[d]; !seen {
				restore[d] = nil
			}
		}
	}
	if err := s.rebasedSince(n, restore); err != nil {
		return nil, err
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	what := fmt.Sprintf("drop-op %d of %s", n, s.ID())
	for _, op := range ops[n-1:] {
		if op.Pending != nil {
			if err := s.removeDebris(ctx, v, op, false, what); err != nil {
				return nil, err
			}
		}
	}
	if err := s.restoreView(ctx, v, restore, what); err != nil {
		return nil, err
	}
	if err := s.ws.db.DeleteTxOpsFrom(ctx, s.ID(), n); err != nil {
		return nil, AsError(err)
	}
	if err := s.clampRebased(ctx, n); err != nil {
		return nil, err
	}
	res := &DropOpsResult{Restored: nonNil(order), Dropped: []int{}}
	for _, op := range ops[n-1:] {
		res.Dropped = append(res.Dropped, op.Seq)
	}
	return res, nil
}

// rebasedSince refuses a drop-op from op n that would restore a path a
// rebase moved the base of after op n was recorded: the state restored
// was made on the old base, and against the new one it would take back
// the workspace's own change without any drift to refuse the apply.
func (s *Stage) rebasedSince(n int, restore map[string]*tree.Entry) error {
	if failpoint.Disabled("drop-op-rebased") {
		return nil // negative control of T-007
	}
	for _, m := range s.cfg.Rebased {
		if _, ok := restore[string(m.Path)]; ok && m.AfterOp >= n {
			return &Error{Code: CodeUnsupported, Message: fmt.Sprintf(
				"op %d of %s cannot be dropped: a rebase after op %d moved the base of %s onto the workspace's content, and what the stage held there before op %d was made on the old base; restoring it would take back the workspace's own change. Drop only ops after %d, or drop the stage",
				n, s.ID(), m.AfterOp, quote.Path(string(m.Path)), n, m.AfterOp)}
		}
	}
	return nil
}

// clampRebased keeps the rebase marks true once the ops from n on are
// gone: a later op takes a number from n on again and records states made
// on the new base.
func (s *Stage) clampRebased(ctx context.Context, n int) error {
	changed := false
	for i := range s.cfg.Rebased {
		if s.cfg.Rebased[i].AfterOp >= n {
			s.cfg.Rebased[i].AfterOp, changed = n-1, true
		}
	}
	if !changed {
		return nil
	}
	return s.saveConfig(ctx)
}

// refresh is how a read brings a path the stage never changed up to date
// with the workspace before it reads it: a frozen view (copy, clone) would
// otherwise keep showing the content of when the stage opened, and reading
// again could never clear a stale read. The path's base moves with it, so
// it stays out of the change set.
type refresh struct {
	side    *Side       // the path's new state in the view and base (nil: absent)
	content []byte      // its content
	entry   *tree.Entry // its new base entry (nil: none)
	// dirs are the directories above the path that the view lacks: they
	// come into the view and the base with it, all with permission bits
	// dirPerm.
	dirs    []tree.Entry
	dirPerm uint32
}

// planRefresh says how a read of path, found as side in the view, brings
// it up to date with the workspace; nil when it is up to date, or the
// stage changed it (a path the stage changed is left alone). Nothing is
// changed.
func (s *Stage) planRefresh(ctx context.Context, v stage.View, path string, side *Side) (*refresh, error) {
	if s.isReversed(path) {
		// Set back to the state after the op the stage was opened at: the
		// workspace's copy is not what the view is meant to show.
		return nil, nil
	}
	m, err := s.manifest()
	if err != nil {
		return nil, err
	}
	b := m.Lookup(path)
	switch {
	case b == nil && side != nil:
		return nil, nil // added by the stage
	case b != nil && (b.Type != tree.File || side == nil || side.Digest != b.Digest || side.Mode != b.ModeString()):
		return nil, nil // changed by the stage (or not a file)
	}
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	at, err := entryAt(ctx, root, path, engine.ContentReader{})
	if err != nil {
		return nil, err
	}
	absent := at.Presence == engine.Absent || at.Presence == engine.NoParent || at.Presence == engine.ParentNotDir
	isFile := at.Found() && at.Entry.Type == tree.File
	switch {
	case b != nil && isFile && at.Entry.Digest == b.Digest && at.Entry.Perm == b.Perm:
		return nil, nil // up to date
	case b == nil && absent:
		return nil, nil
	case absent:
		return &refresh{}, nil
	case !isFile:
		return nil, nil // not ours to refresh: a read sees the stage's file
	}
	cur := at.Entry.Digest
	content, err := s.ws.readWorkspaceFile(root, path, cur)
	if err != nil {
		return nil, err
	}
	st, err := root.Lstat(path)
	if err != nil {
		return nil, AsError(err)
	}
	e := &tree.Entry{Path: path, Type: tree.File, Perm: uint32(st.Mode.Perm()), Size: st.Size, Digest: cur,
		WS: tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}}
	rf := &refresh{side: &Side{Type: "file", Mode: e.ModeString(), Size: st.Size, Digest: cur}, content: content, entry: e}
	if b == nil {
		ok, err := rf.withDirs(v, root, path)
		if err != nil || !ok {
			return nil, err
		}
	}
	return rf, nil
}

// withDirs adds to rf the workspace's directories above path that the view
// lacks. ok is false when they do not all have the same permission bits:
// the view then never shows the path (as it never shows what the
// workspace gained under a directory it did not have).
func (rf *refresh) withDirs(v stage.View, root *fsx.Root, path string) (ok bool, err error) {
	missing, err := missingDirs(v, path)
	if err != nil {
		return false, err
	}
	for i, d := range missing {
		st, err := root.Lstat(d)
		if err != nil {
			return false, AsError(err)
		}
		perm := uint32(st.Mode.Perm())
		if !st.Mode.IsDir() || i > 0 && perm != rf.dirPerm {
			return false, nil
		}
		rf.dirPerm = perm
		rf.dirs = append(rf.dirs, tree.Entry{Path: d, Type: tree.Dir, Perm: perm,
			WS: tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}})
	}
	return true, nil
}

// refreshAndRead is a read that brings path, found as side in the view,
// up to date first (rf), by the protocol of fileop.go: the view and the
// base change together with the read's op, or not at all.
func (s *Stage) refreshAndRead(ctx context.Context, v stage.View, fo stage.FileOps, path string, side *Side, rf *refresh) (*FileResult, error) {
	if rf.side != nil {
		if _, err := s.ws.blobs.PutBytes(ctx, rf.content); err != nil {
			return nil, AsError(err)
		}
	}
	op := readOp(path, rf.side)
	op.Flow = s.flowAttempt
	in, err := newIntent(side, rf.side)
	if err != nil {
		return nil, err
	}
	in.Refresh, in.Base = true, rf.side
	for _, d := range rf.dirs {
		op.Mkdirs = append(op.Mkdirs, d.Path)
		in.DirMode = d.ModeString()
	}
	op.Pending = in
	res := &FileResult{Path: path, Changes: []Change{}}
	err = s.commitFileOp(ctx, op, res, func(ctx context.Context) error {
		if rf.side == nil {
			if err := fo.Remove(ctx, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return s.fileOpError(path, err)
			}
		} else {
			if err := fo.WriteFileTemp(ctx, path, in.Temp, rf.content, fsFileMode(rf.entry.Perm), fsFileMode(rf.dirPerm)); err != nil {
				return s.fileOpError(path, err)
			}
			if vf, err := v.OpenFile(path); err == nil {
				if fi, err := vf.Stat(); err == nil {
					rf.entry.View = statOfView(fi)
				}
				vf.Close()
			}
		}
		failpoint.Hit("fileop:view")
		return s.putBase(path, rf.entry, rf.dirs)
	}, s.readDone(ctx, path, rf.side))
	if err != nil {
		return nil, err
	}
	if rf.side == nil {
		return nil, errorf(CodeFileNotFound, "%s does not exist in stage %s", quote.Path(path), s.ID())
	}
	res.Digest, res.Size, res.Before, res.Content = rf.side.Digest, rf.side.Size, rf.side.Digest, rf.content
	return res, nil
}
