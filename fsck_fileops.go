package wtx

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
)

// Kinds of finding about a stage's per-file ops (T-007).
const (
	// FindFileOpPending: a per-file op a killed wtx left halfway, which
	// the next command on the stage finishes or rolls back.
	FindFileOpPending FindingKind = "fileop-pending" // refusal.interrupted-apply
	// FindUnrecorded: staged content that no op of the stage records
	// (left by a per-file op of an older wtx that was killed halfway, or
	// put in the state root by hand); apply refuses it.
	FindUnrecorded FindingKind = "unrecorded" // io.corrupt
)

// fileOps checks the per-file ops of the open stage s of workspace ws: an
// op left pending, and staged paths that no op records. A workspace whose
// lock another wtx holds may be in the middle of an op: it is not looked
// at. The view is scanned as status scans it.
func (fk *fsck) fileOps(db *state.DB, ws state.Workspace, s state.Stage) {
	if s.State != StateOpen {
		return
	}
	release, busy := tryWorkspaceLock(filepath.Join(fk.dir, workspaceDirs, ws.ID, "lock"))
	if busy {
		return
	}
	defer release()
	blobs, err := openStoreNoCreate(fk.dir)
	if err != nil {
		return // objects() reports the store
	}
	defer blobs.Close()
	root, err := fsx.OpenRoot(fk.dir)
	if err != nil {
		return // modes() reports the state root
	}
	defer root.Close()
	w := &Workspace{path: ws.Path, id: ws.ID, stateDir: fk.dir, state: root, db: db, blobs: blobs, log: slog.New(slog.DiscardHandler), now: time.Now}
	st, err := w.stageFromRow(s)
	if err != nil {
		return // records() reports a stage record that does not decode
	}
	repair := fmt.Sprintf("wtx -C %s status %s (any command on the stage finishes or rolls it back)", shellQuote(ws.Path), s.ID)
	pending, err := st.pendingFileOps(fk.ctx)
	if err == nil && len(pending) > 0 {
		for _, op := range pending {
			fk.add(Finding{Kind: FindFileOpPending, Code: CodeInterruptedApply, Object: s.ID,
				Detail: fmt.Sprintf("open stage %s of %s: op %d (%s) was stopped halfway", s.ID, quotedName(ws.Path), op.Seq, strings.Join(op.Argv, " ")),
				Repair: repair})
		}
		return // the change set is what settling decides
	}
	cs, err := st.Changes(fk.ctx, nil)
	if err != nil {
		return // a view that cannot be scanned here: status says why
	}
	paths, err := st.unrecordedChanges(fk.ctx, cs.changes)
	if err != nil || len(paths) == 0 {
		return
	}
	for _, p := range paths {
		fk.add(Finding{Kind: FindUnrecorded, Code: CodeCorrupt, Path: p, Object: s.ID,
			Detail: fmt.Sprintf("open stage %s of %s holds %s, which no op of it records: apply refuses to land it", s.ID, quotedName(ws.Path), quote.Path(p)),
			Repair: fmt.Sprintf("wtx -C %s apply %s --exclude %s (the rest lands; the path stays staged), or wtx -C %s drop %s",
				shellQuote(ws.Path), s.ID, shellQuote(LiteralSelector(p)), shellQuote(ws.Path), s.ID)})
	}
}
