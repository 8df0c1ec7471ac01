package wtx

// Phase names the part of a long operation a Progress report is about.
// Not persisted: the numbers may change.
type Phase int

const (
	// PhaseStage: making a stage's view (a copy backend copies the
	// workspace); Done counts entries, Total is 0.
	PhaseStage Phase = iota + 1
	// PhaseRead: an apply reads the staged contents it will write into
	// the blob store; Done and Total count files.
	PhaseRead
	// PhaseCheck: an apply or undo compares each path with what it must
	// replace and keeps its pre-image; Done and Total count paths.
	PhaseCheck
	// PhaseWrite: an apply or undo writes its steps into the workspace;
	// Done and Total count steps.
	PhaseWrite
	// PhaseDiff: a diff reads both sides of each changed file; Done and
	// Total count files.
	PhaseDiff
	// PhaseSweep: gc walks the blob store; Done counts objects, Total is 0.
	PhaseSweep
	// PhaseRecover: opening a workspace finishes or rolls back an apply or
	// undo a crash interrupted; Done and Total count its steps.
	PhaseRecover
)

// String names the phase as a progress line shows it.
func (p Phase) String() string {
	switch p {
	case PhaseStage:
		return "staging"
	case PhaseRead:
		return "reading staged files"
	case PhaseCheck:
		return "checking the workspace"
	case PhaseWrite:
		return "writing"
	case PhaseDiff:
		return "comparing"
	case PhaseSweep:
		return "sweeping the blob store"
	case PhaseRecover:
		return "recovering an interrupted apply"
	}
	return "working"
}

// Progress is one report of a long operation: its phase and how far it
// got. Total is 0 when it is not known in advance.
type Progress struct {
	Phase       Phase
	Done, Total int
}

// progress reports p to Options.Progress, if set. It is called often (once
// per path): the callback must be cheap and safe for concurrent use.
func (w *Workspace) progress(phase Phase, done, total int) {
	if w != nil && w.onProgress != nil {
		w.onProgress(Progress{Phase: phase, Done: done, Total: total})
	}
}
