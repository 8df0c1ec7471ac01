package wtx

import (
	"context"
	"fmt"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Staged content that no op records never lands (T-007). A stage whose
// every op says what it changed (per-file ops, and runs that kept a
// checkpoint) and that carries no imported change set can account for each
// path of its change set: a path some op wrote, or a directory one of them
// created or wrote beneath. Any other path got into the view some other
// way — a per-file op killed halfway by a wtx from before ops were
// recorded ahead of their change, or a hand in the state root — and an
// apply that selects it is refused. Stages that cannot account for every
// path (an imported change set, a run without a checkpoint) are not
// checked, nor stages without a per-file op.

// recordedPaths returns the paths the stage's ops account for, and whether
// they account for the whole view (ok false: the check does not apply).
func (s *Stage) recordedPaths(ctx context.Context) (paths map[string]bool, ok bool, err error) {
	if s.cfg.Import != nil {
		return nil, false, nil
	}
	ops, err := s.TxOps(ctx)
	if err != nil {
		return nil, false, err
	}
	paths = map[string]bool{}
	perFile := false
	for _, op := range ops {
		switch {
		case op.Kind == "read":
			continue
		case op.Kind == "write", op.Kind == "edit", op.Kind == "rm":
			perFile = true
		case op.Kind == "run" && op.Checkpoint:
		default:
			return nil, false, nil // a run that kept no checkpoint, or a kind unknown here
		}
		if op.Pending != nil {
			return nil, false, nil // left to settling, which runs first
		}
		for _, f := range op.Files {
			paths[f.Path] = true
		}
		for _, d := range op.Mkdirs {
			paths[d] = true
		}
	}
	// The check is about per-file ops: a stage with none has nothing a
	// killed one could have left (its content came by the library's own
	// hand into the view, as the project's tests stage it).
	return paths, perFile, nil
}

// unrecordedChanges lists the changes no op of the stage accounts for.
func (s *Stage) unrecordedChanges(ctx context.Context, changes []tree.Change) ([]string, error) {
	recorded, ok, err := s.recordedPaths(ctx)
	if err != nil || !ok {
		return nil, err
	}
	// The directories above a recorded path.
	above := map[string]bool{}
	for p := range recorded {
		for d := tree.Parent(p); d != "." && d != "" && !above[d]; d = tree.Parent(d) {
			above[d] = true
		}
	}
	var out []string
	for _, c := range changes {
		if !recorded[c.Path] && !(isDirChange(c) && above[c.Path]) {
			out = append(out, c.Path)
		}
	}
	return out, nil
}

// isDirChange reports whether c adds, removes or changes a directory.
func isDirChange(c tree.Change) bool {
	return c.New != nil && c.New.Type == tree.Dir || c.Old != nil && c.Old.Type == tree.Dir
}

// checkRecorded refuses an apply of changes that hold a path no op of the
// stage records (io.corrupt), naming every such path.
func (s *Stage) checkRecorded(ctx context.Context, changes []tree.Change) error {
	if failpoint.Disabled("unrecorded") {
		return nil // negative control: such content lands
	}
	paths, err := s.unrecordedChanges(ctx, changes)
	if err != nil || len(paths) == 0 {
		return err
	}
	return &Error{Code: CodeCorrupt,
		Message: fmt.Sprintf("stage %s holds %d path(s) that no op of it records, first %s: content that got into the stage some other way than its ops (a per-file op of an older wtx stopped halfway, or a change made in the state root) never lands; nothing was changed",
			s.ID(), len(paths), quote.Path(paths[0])),
		Conflicts: conflictsOf(paths, "unrecorded"),
		Repairs: []Repair{
			{Action: RepairExclude, Stage: s.ID(), Paths: paths, Detail: "apply the rest; those paths stay staged"},
			{Action: RepairRestage, Stage: s.ID(), Detail: "drop the stage and redo its work"},
		}}
}
