package wtx

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/wtx-dev/wtx/internal/annotation"
)

// AnnotationKind names what an Annotation holds, and so who records it.
type AnnotationKind string

// FlowStepAnnotation is a flow step attempt's result, recorded by package
// github.com/wtx-dev/wtx/flow as the step's row (W-001).
const FlowStepAnnotation = AnnotationKind(annotation.FlowStep)

// Annotation is a note an apply records with its op: its bytes travel in
// the op's journal, and the recorder its kind names writes them in the op's
// own database transaction, when the apply records the op or when a
// recovery finds the op committed. Only a package of wtx registers a
// recorder (flow registers FlowStepAnnotation's); an annotation no recorder
// is registered for refuses the apply before it writes anything in the
// workspace.
type Annotation struct {
	Kind AnnotationKind
	// Data is the note as its recorder reads it (JSON).
	Data json.RawMessage
}

// AppliedOp is what an apply knows of its op before it writes it: what an
// Annotate hook may record with it.
type AppliedOp struct {
	OpID            string
	Stage           string
	Written         []string
	ChangesetDigest string
	Counts          Counts
	ResultDigest    string
	// Receipt is the op's receipt id, NotTransactional its list.
	Receipt          string
	NotTransactional []string
}

// annotate asks opts.Annotate, when set, for the note rec carries.
func annotate(opts ApplyOptions, op AppliedOp, rec *opRecord) error {
	if opts.Annotate == nil {
		return nil
	}
	note, err := opts.Annotate(op)
	if err != nil {
		return AsError(err)
	}
	if note == nil {
		return nil
	}
	if note.Kind != FlowStepAnnotation || annotation.Lookup(annotation.Kind(note.Kind)) == nil {
		return errorf(CodeUsage, "an annotation of kind %q has no recorder in this program; nothing was applied", note.Kind)
	}
	if d := bytes.TrimSpace(note.Data); !json.Valid(d) || len(d) == 0 || d[0] != '{' {
		return errorf(CodeUsage, "an annotation of kind %q is not a JSON object; nothing was applied", note.Kind)
	}
	rec.Step = append(json.RawMessage(nil), note.Data...)
	return nil
}

// noteRecorder is the recorder of the note rec carries (nil when it has
// none); a journal whose note no recorder of this program reads is kept.
func noteRecorder(rec *opRecord) (annotation.Recorder, error) {
	if len(rec.Step) == 0 || string(rec.Step) == "null" {
		// None (a journal may spell it null, as a nil field was once).
		return nil, nil
	}
	if r := annotation.Lookup(annotation.FlowStep); r != nil {
		return r, nil
	}
	return nil, &Error{Code: CodeUnsupported, Message: fmt.Sprintf("op %s carries a flow step this program cannot record (it does not link github.com/wtx-dev/wtx/flow); the op is kept in its journal", rec.Op.ID)}
}
