// Package annotation holds the recorders of the notes an apply carries to
// its op: a package of wtx that annotates an apply (ApplyOptions.Annotate)
// registers here how its note is written, and the root package calls that
// recorder in the op's own database transaction, from the apply that
// commits the op or from the recovery that finds it committed in a journal.
//
// A note is opaque bytes to the root: it travels in the op record, under a
// JSON field its kind names, and only its recorder reads it.
package annotation

import (
	"context"
	"sync"
	"time"

	"github.com/wtx-dev/wtx/internal/state"
)

// Kind names a note; it is also the op record's JSON field that holds it,
// so a kind never changes meaning.
type Kind string

// FlowStep is a flow step attempt's row, recorded with the op that applies
// the step (W-001). persisted: the op record's "flow_step" field.
const FlowStep Kind = "flow_step"

// Recorder writes note in tx, the transaction that records the op; at is
// when the op was made.
type Recorder func(ctx context.Context, tx *state.Txn, note []byte, at time.Time) error

var (
	mu        sync.RWMutex
	recorders = map[Kind]Recorder{}
)

// Register makes r the recorder of kind's notes. A kind has one recorder:
// registering a second is a programming error and panics.
func Register(kind Kind, r Recorder) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := recorders[kind]; ok {
		panic("annotation: a second recorder for " + string(kind))
	}
	recorders[kind] = r
}

// Lookup returns kind's recorder, or nil when none is registered.
func Lookup(kind Kind) Recorder {
	mu.RLock()
	defer mu.RUnlock()
	return recorders[kind]
}
