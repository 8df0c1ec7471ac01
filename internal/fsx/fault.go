package fsx

import (
	"io/fs"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// injected returns the error a fault-injection build injects into the
// mutating call op on rel, or nil. Every mutating method of this package
// asks it first, so a test can make the N-th one fail (see
// failpoint.Fault); an ordinary build always gets nil.
func injected(op, rel string) error {
	if err := failpoint.Fault(op); err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	return nil
}
